/**
 * `galvanic op create|show|list|cancel|retry`: group operations through the HTTP API, as any
 * client would. With --wait it follows the operation to its end: a live progress bar on a
 * terminal, one plain line per change otherwise (logs, CI). Exit status: 0 when the
 * operation succeeded (or, without --wait, the request did), 1 otherwise, 2 for bad usage.
 */
import { SingleBar } from 'cli-progress';
import { parseArgs } from 'node:util';

const USAGE = `Usage: galvanic op <command> [options]

Commands:
  create   --nodes A,B,… | --selector key=value,…
           [--steps JSON | --boot-device DEV --power TARGET | --manage | --inspect | --provide
            | --deploy ISO_URL [--configdrive URL_OR_GZIP_B64] | --undeploy]
           [--max-parallel N] [--max-attempts N] [--initial-delay S] [--max-delay S]
           [--on-failure continue|abort] [--description TEXT] [--queue] [--wait]
  show ID  [--wait] [--all-nodes]        the operation, its counts and its failed nodes
  list     [--state STATE] [--limit N]
  cancel ID                              no node starts after this returns
  retry ID [--wait]                      a new round for the failed nodes only

Options:
  --url URL          the API (default: $GALVANIC_URL or http://127.0.0.1:6385)
  --user USER:PASS   HTTP basic authentication (default: $GALVANIC_AUTH)
  --json             print the API's JSON instead of text`;

interface OperationBody {
  uuid: string;
  state: string;
  description: string | null;
  counts: Record<string, number>;
  progress: { done: number; total: number; percent: number };
  round: number;
  abort_reason: string | null;
  created_at: string;
  finished_at: string | null;
  nodes?: Array<{ node_uuid: string; node_name: string | null; state: string; attempts: number; last_error: string | null }>;
  next?: string;
}

class UsageError extends Error {}

/** A small client of /v1/operations. */
class ApiClient {
  constructor(private readonly url: string, private readonly auth: string | undefined) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' };
    if (this.auth) headers.authorization = `Basic ${Buffer.from(this.auth).toString('base64')}`;
    const res = await fetch(`${this.url.replace(/\/+$/, '')}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${faultOf(text)}`);
    return JSON.parse(text) as T;
  }
}

/** The faultstring of Ironic's error body, or the text as it came. */
function faultOf(text: string): string {
  try {
    return (JSON.parse((JSON.parse(text) as { error_message: string }).error_message) as { faultstring: string }).faultstring;
  } catch {
    return text.slice(0, 500);
  }
}

function countsLine(op: OperationBody): string {
  const c = op.counts;
  return `${op.state}: ${op.progress.done}/${op.progress.total} done (${op.progress.percent}%), ${c.succeeded} succeeded, ${c.failed} failed, ${c.cancelled} cancelled, ${c.running} running, ${c.pending} pending`;
}

function describe(op: OperationBody): string {
  const lines = [`operation ${op.uuid}${op.description ? ` (${op.description})` : ''}, round ${op.round}`, `  ${countsLine(op)}`];
  if (op.abort_reason) lines.push(`  ${op.abort_reason}`);
  for (const n of op.nodes ?? []) {
    lines.push(`  ${n.node_name ?? n.node_uuid}  ${n.state}  attempts=${n.attempts}${n.last_error ? `  ${n.last_error}` : ''}`);
  }
  return lines.join('\n');
}

function parseSelector(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const pair of text.split(',').filter(Boolean)) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new UsageError(`--selector: expected key=value, got "${pair}"`);
    const [key, value] = [pair.slice(0, eq), pair.slice(eq + 1)];
    out[key] = key === 'maintenance' ? value === 'true' : value;
  }
  return out;
}

function numberOpt(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(`${name}: not a number: ${value}`);
  return n;
}

function buildCreateBody(v: Record<string, string | boolean | undefined>): Record<string, unknown> {
  let steps: unknown;
  if (typeof v.steps === 'string') {
    try {
      steps = JSON.parse(v.steps);
    } catch {
      throw new UsageError('--steps must be JSON, e.g. [{"action":"power","args":{"target":"power on"}}]');
    }
  } else {
    const list: unknown[] = [];
    // The usual order for a boot: the device first, then the power.
    if (typeof v['boot-device'] === 'string') list.push({ action: 'set_boot_device', args: { boot_device: v['boot-device'] } });
    if (typeof v.power === 'string') list.push({ action: 'power', args: { target: v.power } });
    // Provision verbs in the order a node goes through them.
    for (const verb of ['manage', 'inspect', 'provide'] as const) if (v[verb]) list.push({ action: verb });
    if (typeof v.deploy === 'string') {
      const args: Record<string, unknown> = { instance_info: { boot_iso: v.deploy } };
      if (typeof v.configdrive === 'string') args.configdrive = v.configdrive;
      list.push({ action: 'deploy', args });
    } else if (v.configdrive !== undefined) {
      throw new UsageError('--configdrive goes with --deploy');
    }
    if (v.undeploy) list.push({ action: 'undeploy' });
    if (list.length === 0) throw new UsageError('create needs --steps, or --boot-device and/or --power, or a provision verb (--deploy ISO_URL, --undeploy, --inspect, --provide, --manage)');
    steps = list;
  }
  const body: Record<string, unknown> = { steps };
  if (typeof v.nodes === 'string') body.nodes = v.nodes.split(',').filter(Boolean);
  if (typeof v.selector === 'string') body.selector = parseSelector(v.selector);
  const maxParallel = numberOpt(v['max-parallel'] as string | undefined, '--max-parallel');
  if (maxParallel !== undefined) body.max_parallel = maxParallel;
  const retry: Record<string, number> = {};
  for (const [opt, key] of [['max-attempts', 'max_attempts'], ['initial-delay', 'initial_delay'], ['max-delay', 'max_delay']] as const) {
    const n = numberOpt(v[opt] as string | undefined, `--${opt}`);
    if (n !== undefined) retry[key] = n;
  }
  if (Object.keys(retry).length) body.retry = retry;
  if (v['on-failure'] !== undefined) body.on_failure = v['on-failure'];
  if (v.description !== undefined) body.description = v.description;
  if (v.queue) body.queue = true;
  return body;
}

/** Follows the operation until it ends: a bar on a terminal, a line per change elsewhere. */
async function follow(api: ApiClient, uuid: string, tty: boolean, pollMs = 500): Promise<OperationBody> {
  const bar = tty ? new SingleBar({ format: ' {bar} {percentage}% | {value}/{total} nodes | {state} | {failed} failed', hideCursor: true }) : undefined;
  let last = '';
  try {
    for (;;) {
      const op = await api.call<OperationBody>('GET', `/v1/operations/${uuid}?limit=1`);
      const payload = { state: op.state, failed: op.counts.failed };
      if (bar) {
        if (last === '') bar.start(op.progress.total, op.progress.done, payload);
        else bar.update(op.progress.done, payload);
        last = 'started';
      } else {
        const line = countsLine(op);
        if (line !== last) process.stdout.write(`${new Date().toISOString()} ${uuid} ${line}\n`);
        last = line;
      }
      if (op.finished_at !== null) return op;
      await new Promise((r) => setTimeout(r, pollMs));
    }
  } finally {
    bar?.stop();
  }
}

/** The operation and its failed nodes (or all its nodes), every page. */
async function fetchWithNodes(api: ApiClient, uuid: string, all: boolean): Promise<OperationBody> {
  const op = await api.call<OperationBody>('GET', `/v1/operations/${uuid}${all ? '' : '?node_state=failed'}`);
  let next = op.next;
  while (next) {
    const page = await api.call<OperationBody>('GET', next.replace(/^https?:\/\/[^/]+/, ''));
    op.nodes!.push(...(page.nodes ?? []));
    next = page.next;
  }
  return op;
}

async function finish(api: ApiClient, op: OperationBody, v: { wait?: boolean; json?: boolean; 'all-nodes'?: boolean }): Promise<number> {
  let shown = op;
  if (v.wait) {
    await follow(api, op.uuid, process.stdout.isTTY === true && !v.json);
    shown = await fetchWithNodes(api, op.uuid, v['all-nodes'] === true);
  }
  process.stdout.write(v.json ? `${JSON.stringify(shown, null, 2)}\n` : `${describe(shown)}\n`);
  return v.wait && shown.state !== 'succeeded' ? 1 : 0;
}

export async function runOperationCli(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' }, user: { type: 'string' }, json: { type: 'boolean' }, wait: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
        nodes: { type: 'string' }, selector: { type: 'string' }, steps: { type: 'string' }, power: { type: 'string' }, 'boot-device': { type: 'string' },
        'max-parallel': { type: 'string' }, 'max-attempts': { type: 'string' }, 'initial-delay': { type: 'string' }, 'max-delay': { type: 'string' },
        'on-failure': { type: 'string' }, description: { type: 'string' }, queue: { type: 'boolean' }, state: { type: 'string' }, limit: { type: 'string' },
        'all-nodes': { type: 'boolean' },
        manage: { type: 'boolean' }, inspect: { type: 'boolean' }, provide: { type: 'boolean' }, undeploy: { type: 'boolean' },
        deploy: { type: 'string' }, configdrive: { type: 'string' },
      },
    });
  } catch (err) {
    process.stderr.write(`galvanic op: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const { values: v, positionals } = parsed;
  const [command, id] = positionals;
  if (v.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return v.help ? 0 : 2;
  }
  const api = new ApiClient(v.url ?? process.env.GALVANIC_URL ?? 'http://127.0.0.1:6385', v.user ?? process.env.GALVANIC_AUTH);
  try {
    const needId = () => {
      if (!id) throw new UsageError(`${command} needs an operation id`);
      return encodeURIComponent(id);
    };
    switch (command) {
      case 'create':
        return await finish(api, await api.call<OperationBody>('POST', '/v1/operations', buildCreateBody(v)), v);
      case 'show':
        return await finish(api, await fetchWithNodes(api, needId(), v['all-nodes'] === true), v);
      case 'cancel':
        return await finish(api, await api.call<OperationBody>('POST', `/v1/operations/${needId()}/cancel`), { json: v.json });
      case 'retry':
        return await finish(api, await api.call<OperationBody>('POST', `/v1/operations/${needId()}/retry`), v);
      case 'list': {
        const q = new URLSearchParams();
        if (v.state) q.set('state', v.state);
        if (v.limit) q.set('limit', v.limit);
        const { operations } = await api.call<{ operations: OperationBody[] }>('GET', `/v1/operations${q.size ? `?${q.toString()}` : ''}`);
        if (v.json) process.stdout.write(`${JSON.stringify(operations, null, 2)}\n`);
        else for (const op of operations) process.stdout.write(`${op.uuid}  ${op.created_at}  ${countsLine(op)}${op.description ? `  ${op.description}` : ''}\n`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`galvanic op: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`galvanic op: ${(err as Error).message}\n`);
    return 1;
  }
}
