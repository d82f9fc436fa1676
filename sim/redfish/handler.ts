/**
 * The Redfish side of one simulated BMC: authentication (sessions and Basic), faults and
 * latency, the dynamic resources (system power and boot, Reset, sessions) and static bodies
 * from the model. The control API lives in control.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { normalisePath, type SimModel } from './model.js';
import { NO_QUIRKS, type VmediaQuirks } from './quirks.js';
import { etagOf, parseJsonObject, redfishError, type RequestOrigin, type SimBmc, type SystemState } from './state.js';
import { Storage, type StorageOptions } from './storage.js';
import { UpdateService } from './update-service.js';
import { VirtualMedia, type ImageCheck, type Reply } from './vmedia.js';
import { EventService } from './events.js';
import { Bios } from './bios.js';
import { DellOem, type DellEnv } from './dell.js';

export interface Credentials {
  username: string;
  password: string;
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'odata-version': '4.0', 'cache-control': 'no-cache' };
const GARBAGE = [
  '<html><head><title>500</title></head><body>Internal Server Error</body></html>',
  '{"@odata.id": "/redfish/v1/Systems/1", "PowerState": "O',
  '\u0000\u0001\u0002 not json',
  'null',
  '[1, 2, 3]',
];

export function send(res: ServerResponse, status: number, body?: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const h: Record<string, string | number> = { ...JSON_HEADERS, ...headers };
  if (body === undefined) {
    h['content-length'] = 0;
    res.writeHead(status, h).end();
    return;
  }
  h['content-length'] = Buffer.byteLength(body);
  res.writeHead(status, h).end(body);
}

function reply(res: ServerResponse, r: Reply): void {
  send(res, r.status, r.body, r.headers);
}

export function readBody(req: IncomingMessage, limit = 1 << 20): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function stripWeak(tag: string): string {
  return tag.trim().replace(/^W\//, '');
}

/** The header a client names its request with (the Redfish driver's trace). */
const TRACE_HEADER = 'x-galvanic-trace';

export class RedfishHandler {
  readonly vmedia: VirtualMedia;
  readonly events: EventService;
  readonly bios: Bios;
  readonly storage: Storage;
  readonly updates: UpdateService;
  /** The Dell OEM services, when the model is an iDRAC. */
  readonly dell: DellOem | null;
  /** Requests seen on each connection, for RequestOrigin.conn. */
  private readonly onSocket = new WeakMap<object, number>();

  constructor(
    private readonly model: SimModel,
    private readonly creds: Credentials,
    private readonly quirks: Readonly<VmediaQuirks> = NO_QUIRKS,
    imageCheck: ImageCheck = 'none',
    storage?: Readonly<StorageOptions>,
  ) {
    this.vmedia = new VirtualMedia(model, quirks, imageCheck);
    this.events = new EventService(model);
    this.bios = new Bios(model);
    this.storage = new Storage(model, storage);
    this.updates = new UpdateService(model);
    this.dell = model.dellManager ? new DellOem(model.dellManager) : null;
  }

  private system(bmc: SimBmc, p: string): SystemState {
    let s = bmc.systems.get(p);
    if (!s) {
      s = this.model.initialSystem(p);
      bmc.systems.set(p, s);
    }
    return s;
  }

  private authenticated(bmc: SimBmc, req: IncomingMessage): boolean {
    const token = req.headers['x-auth-token'];
    if (typeof token === 'string' && token) return bmc.sessions.has(token);
    const auth = req.headers.authorization;
    if (typeof auth === 'string' && auth.startsWith('Basic ')) {
      const decoded = Buffer.from(auth.slice(6), 'base64').toString('utf8');
      const i = decoded.indexOf(':');
      return i >= 0 && decoded.slice(0, i) === this.creds.username && decoded.slice(i + 1) === this.creds.password;
    }
    return false;
  }

  async handle(bmc: SimBmc, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    if (bmc.faults.powerLost || this.dell?.resetting(bmc)) {
      // No BMC to answer: the connection drops at once, and nothing is counted.
      req.socket.destroy();
      return;
    }
    const request = bmc.begin(method, url);
    const nth = (this.onSocket.get(req.socket) ?? 0) + 1;
    this.onSocket.set(req.socket, nth);
    const trace = req.headers[TRACE_HEADER];
    const origin: RequestOrigin = { trace: typeof trace === 'string' ? trace : null, conn: `${req.socket.remotePort ?? '?'}/${nth}` };
    res.once('close', () => request.end(res.writableFinished ? res.statusCode : 0));
    // DELETE too: a volume's deletion may carry @Redfish.OperationApplyTime.
    const body = method === 'POST' || method === 'PATCH' || method === 'PUT' || method === 'DELETE' ? await readBody(req).catch(() => '') : '';

    const f = bmc.faults;
    let delay = f.latencyMs[0] + Math.random() * Math.max(0, f.latencyMs[1] - f.latencyMs[0]);
    if (f.slowFraction > 0 && Math.random() < f.slowFraction) delay = f.slowMs;
    if (delay > 0) await sleep(delay);
    if (res.destroyed) return;
    // Only what the client waited for: a request it gave up on is not part of its chain.
    request.delayed(delay);
    // A hung BMC: the request stays open until the client gives up.
    if (f.hang || (f.timeoutRate > 0 && Math.random() < f.timeoutRate)) return;
    if (f.resetRate > 0 && Math.random() < f.resetRate) {
      req.socket.destroy();
      return;
    }
    if (f.unavailable.count > 0) {
      bmc.setFaults({ unavailable: { count: f.unavailable.count - 1, retryAfter: f.unavailable.retryAfter } });
      send(res, 503, redfishError('ServiceTemporarilyUnavailable', 'The service is temporarily unavailable.'), { 'retry-after': String(f.unavailable.retryAfter) });
      return;
    }
    if (f.failRate > 0 && Math.random() < f.failRate) {
      send(res, 500, redfishError('InternalError', 'The request failed due to an internal service error.'));
      return;
    }
    if (f.garbageRate > 0 && Math.random() < f.garbageRate) {
      send(res, 200, GARBAGE[Math.floor(Math.random() * GARBAGE.length)]);
      return;
    }
    await this.route(bmc, req, res, method, url, body, origin);
  }

  private async route(bmc: SimBmc, req: IncomingMessage, res: ServerResponse, method: string, url: string, body: string, origin: RequestOrigin): Promise<void> {
    const p = normalisePath(url);
    const qi = url.indexOf('?');
    const query = qi >= 0 ? url.slice(qi + 1) : '';
    const sessions = this.model.sessionsPath;
    if (p === sessions && method === 'POST') return this.login(bmc, res, body);
    if (p === '/redfish' && method === 'GET') return send(res, 200, JSON.stringify({ v1: '/redfish/v1/' }));
    if (!this.model.isPublic(p) && !this.authenticated(bmc, req)) {
      bmc.unauthorized++;
      return send(res, 401, redfishError('NoValidSession', 'There is no valid session established with the implementation.'), { 'www-authenticate': 'Basic realm="Redfish simulator"' });
    }
    if (p === sessions && method === 'GET') return this.listSessions(bmc, res);
    if (p.startsWith(`${sessions}/`)) return this.session(bmc, res, method, p.slice(sessions.length + 1));
    if (this.model.systemPaths.has(p)) {
      if (method === 'GET') {
        const s = this.system(bmc, p);
        return send(res, 200, this.updates.decorate(bmc, p, this.model.systemBody(p, s, bmc.index)), { etag: etagOf(s) });
      }
      if (method === 'PATCH') return this.patchSystem(bmc, req, res, p, body, origin);
      return send(res, 405, redfishError('OperationNotAllowed', `${method} is not allowed on ${url}`), { allow: 'GET, PATCH' });
    }
    for (const sys of this.model.systemPaths) {
      if (p === this.model.resetTarget(sys)) {
        if (method !== 'POST') return send(res, 405, redfishError('OperationNotAllowed', 'Actions need POST'), { allow: 'POST' });
        return this.reset(bmc, res, sys, body, origin);
      }
    }
    if (this.updates.owns(p)) return reply(res, await this.updates.route(bmc, method, p, body));
    const slot = this.model.mediaSlots.get(p);
    if (slot) {
      if (method === 'GET') return reply(res, this.vmedia.get(bmc, slot));
      const ifMatch = req.headers['if-match'];
      if (method === 'PATCH') return reply(res, await this.vmedia.patch(bmc, slot, typeof ifMatch === 'string' ? ifMatch : undefined, body));
      return send(res, 405, redfishError('OperationNotAllowed', `${method} is not allowed on ${url}`), { allow: 'GET, PATCH' });
    }
    const action = this.model.mediaActions.get(p);
    if (action) {
      if (method !== 'POST') return send(res, 405, redfishError('OperationNotAllowed', 'Actions need POST'), { allow: 'POST' });
      if (action.action === 'insert') return reply(res, await this.vmedia.insertAction(bmc, action.slot, body));
      return reply(res, this.vmedia.ejectAction(bmc, action.slot, body));
    }
    if (this.events.handles(p)) return reply(res, this.events.handle(bmc, method, p, body));
    if (this.dell?.owns(p)) {
      const answer = this.dell.route(bmc, method, p, body, this.dellEnv(bmc));
      if (answer) return reply(res, answer);
    }
    const bios = this.bios.route(bmc, method, p, body, (sys) => this.system(bmc, sys));
    if (bios) return reply(res, bios);
    const storage = this.storage.route(bmc, method, p, body);
    if (storage) return reply(res, storage);
    if (method !== 'GET') return send(res, 405, redfishError('OperationNotAllowed', `${method} is not allowed on ${url}`), { allow: 'GET' });
    const text = this.model.get(p, query, bmc.index);
    if (text === null) return send(res, 404, redfishError('ResourceMissingAtURI', `The resource at the URI ${url} was not found.`));
    send(res, 200, this.updates.decorate(bmc, p, text));
  }

  /** What the Dell OEM services need of this BMC's system, BIOS and storage. */
  private dellEnv(bmc: SimBmc): DellEnv {
    const [systemPath] = this.model.systemPaths;
    return {
      systemPath,
      system: (p) => this.system(bmc, p),
      biosPending: (s) => this.bios.hasPending(s),
      discardPending: (s) => ({ bios: this.bios.discardPending(bmc, s), volumes: this.storage.discardPending(bmc) }),
    };
  }

  private login(bmc: SimBmc, res: ServerResponse, body: string): void {
    bmc.logins++;
    const creds = parseJsonObject(body);
    if (!creds || typeof creds.UserName !== 'string' || typeof creds.Password !== 'string') {
      return send(res, 400, redfishError('PropertyMissing', 'The request body must hold UserName and Password.'));
    }
    if (creds.UserName !== this.creds.username || creds.Password !== this.creds.password) {
      bmc.unauthorized++;
      return send(res, 401, redfishError('ResourceAtUriUnauthorized', 'Invalid username or password.'));
    }
    const session = bmc.openSession(creds.UserName);
    if (!session) {
      const err = redfishError('SessionLimitExceeded', 'The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.');
      if (bmc.faults.sessionLimitStatus === 503) return send(res, 503, err, { 'retry-after': '1' });
      return send(res, 400, err);
    }
    const location = `${this.sessionsUrl()}/${session.id}`;
    send(res, 201, JSON.stringify({ '@odata.type': '#Session.v1_6_0.Session', '@odata.id': location, Id: session.id, Name: 'User Session', UserName: session.user }), {
      'x-auth-token': session.token,
      location,
    });
  }

  private sessionsUrl(): string {
    // The model's path is lower case; real BMCs answer with the canonical spelling.
    return this.model.sessionsPath === '/redfish/v1/sessionservice/sessions' ? '/redfish/v1/SessionService/Sessions' : this.model.sessionsPath;
  }

  private listSessions(bmc: SimBmc, res: ServerResponse): void {
    const base = this.sessionsUrl();
    const members = [...bmc.sessions.values()].map((s) => ({ '@odata.id': `${base}/${s.id}` }));
    send(res, 200, JSON.stringify({ '@odata.type': '#SessionCollection.SessionCollection', '@odata.id': base, Name: 'Session Collection', 'Members@odata.count': members.length, Members: members }));
  }

  private session(bmc: SimBmc, res: ServerResponse, method: string, id: string): void {
    const s = bmc.sessionById(id);
    if (!s) return send(res, 404, redfishError('ResourceMissingAtURI', `Session ${id} does not exist.`));
    if (method === 'DELETE') {
      bmc.sessions.delete(s.token);
      return send(res, 204);
    }
    if (method === 'GET') return send(res, 200, JSON.stringify({ '@odata.id': `${this.sessionsUrl()}/${s.id}`, Id: s.id, Name: 'User Session', UserName: s.user }));
    send(res, 405, redfishError('OperationNotAllowed', `${method} is not allowed on a session`), { allow: 'GET, DELETE' });
  }

  private reset(bmc: SimBmc, res: ServerResponse, sys: string, body: string, origin: RequestOrigin): void {
    const args = parseJsonObject(body);
    const type = args?.ResetType;
    if (typeof type !== 'string') return send(res, 400, redfishError('ActionParameterMissing', 'The action ComputerSystem.Reset requires the parameter ResetType.'));
    if (!this.model.resetTypes(sys).includes(type)) {
      return send(res, 400, redfishError('ActionParameterNotSupported', `The parameter ResetType with value ${type} is not supported by the action ComputerSystem.Reset.`));
    }
    const s = this.system(bmc, sys);
    let booted = false;
    bmc.reset(s, type, () => {
      booted = true;
      return this.booting(bmc, sys, s);
    }, origin);
    // Pending BIOS settings and firmware images waiting for a boot take effect at POST, as on a real server.
    if (booted) {
      this.bios.booted(bmc, s);
      this.updates.booted(bmc);
    }
    this.vmedia.checkBoot(bmc, s);
    send(res, 204);
  }

  /** What a system that boots now boots from; volume changes waiting for a boot are applied. */
  booting(bmc: SimBmc, sys: string, s: SystemState): ReturnType<VirtualMedia['bootPlan']> {
    this.storage.booting(bmc);
    return this.vmedia.bootPlan(bmc, sys, s);
  }

  private patchSystem(bmc: SimBmc, req: IncomingMessage, res: ServerResponse, p: string, body: string, origin: RequestOrigin): void {
    const s = this.system(bmc, p);
    const ifMatch = req.headers['if-match'];
    if (typeof ifMatch === 'string') {
      if (ifMatch.trim() !== '*' && stripWeak(ifMatch) !== stripWeak(etagOf(s))) {
        return send(res, 412, redfishError('PreconditionFailed', 'The ETag supplied did not match the ETag required to change this resource.'));
      }
    } else if (bmc.faults.requireIfMatch) {
      return send(res, 428, redfishError('PreconditionRequired', 'A precondition header or annotation is required to change this resource.'));
    }
    const patch = parseJsonObject(body);
    if (!patch) return send(res, 400, redfishError('MalformedJSON', 'The request body submitted was malformed JSON.'));
    const boot = patch.Boot;
    if (boot !== undefined) {
      if (typeof boot !== 'object' || boot === null) return send(res, 400, redfishError('PropertyValueTypeError', 'Boot must be an object.'));
      const allowed = this.model.bootTargets(p);
      if (allowed === null) return send(res, 400, redfishError('PropertyUnknown', 'The property Boot is not in the list of valid properties for the resource.'));
      const b = boot as Record<string, unknown>;
      const next = { ...s.boot };
      const check = (key: keyof typeof next, values: readonly string[]): string | null => {
        const v = b[key];
        if (v === undefined) return null;
        if (typeof v !== 'string' || !values.includes(v)) return `The value ${JSON.stringify(v)} for the property ${key} is not in the list of acceptable values.`;
        next[key] = v;
        return null;
      };
      const problem =
        check('BootSourceOverrideTarget', allowed) ??
        check('BootSourceOverrideEnabled', this.quirks.noContinuous ? ['Disabled', 'Once'] : ['Disabled', 'Once', 'Continuous']) ??
        check('BootSourceOverrideMode', ['UEFI', 'Legacy']);
      if (problem) {
        bmc.event('refused', { call: 'PATCH Boot', status: 400, messageId: 'PropertyValueNotInList', boot: b, ...origin });
        return send(res, 400, redfishError('PropertyValueNotInList', problem, ['#/Boot']));
      }
      if (b.HttpBootUri !== undefined) {
        // HttpBootUri goes with UEFI HTTP boot: a BMC without that target has no such property.
        const refusal = !allowed.includes('UefiHttp')
          ? { id: 'PropertyUnknown', text: 'The property HttpBootUri is not in the list of valid properties for the resource.' }
          : b.HttpBootUri !== null && typeof b.HttpBootUri !== 'string'
            ? { id: 'PropertyValueTypeError', text: `The value ${JSON.stringify(b.HttpBootUri)} for the property HttpBootUri is of a different type than the property can accept.` }
            : typeof b.HttpBootUri === 'string' && b.HttpBootUri !== '' && !/^https?:\/\/[^/\s]+/i.test(b.HttpBootUri)
              ? { id: 'PropertyValueFormatError', text: `The value ${JSON.stringify(b.HttpBootUri)} for the property HttpBootUri is of a different format than the property can accept.` }
              : null;
        if (refusal) {
          bmc.event('refused', { call: 'PATCH Boot', status: 400, messageId: refusal.id, boot: b, ...origin });
          return send(res, 400, redfishError(refusal.id, refusal.text, ['#/Boot/HttpBootUri']));
        }
        next.HttpBootUri = b.HttpBootUri === '' ? null : (b.HttpBootUri as string | null);
      }
      s.boot = next;
      // A standard override names real devices: `Cd` is the physical drive again on an old iDRAC.
      s.virtualCd = false;
      s.version++;
      bmc.event('boot-override', {
        target: next.BootSourceOverrideTarget, enabled: next.BootSourceOverrideEnabled, mode: next.BootSourceOverrideMode,
        ...(next.HttpBootUri ? { httpBootUri: next.HttpBootUri } : {}), ...origin,
      });
    }
    send(res, 204);
  }
}
