/**
 * The `redfish` vendor interface (Ironic's RedfishVendorPassthru): BMC event subscriptions
 * through the BMC's EventService. The arguments are checked as Ironic checks them, the
 * EventTypes against what the BMC offers; every BMC failure is Ironic's RedfishError with
 * its message. Its answers are shaped as Ironic's: a subscription's common fields, and the
 * BMC's collection as it sent it.
 */
import { DriverError, InvalidParameterValue, RedfishError, RedfishErrorNotFound } from '../../common/errors.js';
import type { DriverContext, VendorInterface, VendorMethod } from '../interfaces.js';
import { pyRepr } from '../inspection-hooks.js';
import type { RedfishCall, RedfishClient, Resource } from './client.js';
import { statusError } from './client.js';
import { isObject, linkPath, prop, type Json } from './odata.js';
import { TOPOLOGY_TTL_MS } from './system.js';

/** The fields of a subscription Ironic returns (its SUBSCRIPTION_COMMON_FIELDS). */
const COMMON_FIELDS = ['Id', 'Context', 'Protocol', 'Destination', 'EventTypes'];
/** sushy's EventType values: what a subscription may ask for when the service lists none. */
const EVENT_TYPES = ['StatusChange', 'ResourceUpdated', 'ResourceAdded', 'ResourceRemoved', 'Alert', 'MetricReport', 'Other'];

type Args = Readonly<Record<string, unknown>>;

/** Python's str() of a JSON value, as Ironic's `%s` shows it. */
const pyStr = (v: unknown) => (typeof v === 'string' ? v : pyRepr(v));

/**
 * rfc3986's check in Ironic: a scheme and a host, and every component made of the characters
 * it allows. Any scheme passes here; the BMC refuses those it cannot send to.
 */
function isValidUri(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/.exec(v);
  if (!m) return false;
  const authority = m[2];
  const at = authority.lastIndexOf('@');
  const hostPort = at >= 0 ? authority.slice(at + 1) : authority;
  const host = hostPort.startsWith('[') ? hostPort.slice(0, hostPort.indexOf(']') + 1) : hostPort.replace(/:\d*$/, '');
  const chars = /^[A-Za-z0-9\-._~%!$&'()*+,;=:@/?[\]]*$/;
  return host !== '' && /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)$/.test(host) && [m[2], m[3], m[4] ?? '', (m[5] ?? '').slice(1)].every((part) => chars.test(part));
}

/** Ironic's _validate_create_subscription, less the EventTypes (they need the BMC). */
function validateCreate(args: Args): void {
  const context = args.Context === undefined ? '' : args.Context;
  const protocol = args.Protocol === undefined ? 'Redfish' : args.Protocol;
  if (typeof context !== 'string') throw new InvalidParameterValue(`Context ${pyStr(context)} is not a valid string`);
  if (typeof protocol !== 'string') throw new InvalidParameterValue(`Protocol ${pyStr(protocol)} is not a string`);
  const headers = args.HttpHeaders;
  if (headers !== undefined && headers !== null && !Array.isArray(headers)) throw new InvalidParameterValue(`HttpHeaders ${pyStr(headers)} is not a list of headers`);
  if (!isValidUri(args.Destination)) throw new InvalidParameterValue(`Destination ${pyStr(args.Destination)} is not a valid URI`);
}

/** Ironic's _validate_delete_subscription; Ironic's get_subscription has none and fails with a 500 instead. */
function validateId(args: Args): void {
  if (args.id === undefined || args.id === null || args.id === '' || args.id === 0 || args.id === false) throw new InvalidParameterValue("id can't be None");
}

function common(body: Json): Json {
  return Object.fromEntries(COMMON_FIELDS.filter((k) => k in body).map((k) => [k, body[k]]));
}

/** Where the BMC's EventService and its subscriptions are, followed from the service root. */
interface EventPaths {
  service: string;
  subscriptions: string;
}

export class RedfishVendor implements VendorInterface {
  readonly supported = true;
  readonly methods: Readonly<Record<string, VendorMethod>>;

  constructor(private readonly client: RedfishClient) {
    const sync = { async: false, attach: false, requireExclusiveLock: true } as const;
    this.methods = {
      create_subscription: {
        ...sync, httpMethods: ['POST'],
        description: "Creates a subscription on a node. Required argument: a dictionary of {'Destination': 'destination_url'}",
        validate: validateCreate,
        run: (ctx, args) => this.create(ctx, args),
      },
      delete_subscription: {
        ...sync, httpMethods: ['DELETE'],
        description: "Delete a subscription on a node. Required argument: a dictionary of {'id': 'subscription_bmc_id'}",
        validate: validateId,
        run: (ctx, args) => this.remove(ctx, args),
      },
      get_all_subscriptions: {
        ...sync, httpMethods: ['GET'],
        description: 'Returns all subscriptions on the node.',
        run: (ctx) => this.getAll(ctx),
      },
      get_subscription: {
        ...sync, httpMethods: ['GET'],
        description: "Get a subscription on the node. Required argument: a dictionary of {'id': 'subscription_bmc_id'}",
        validate: validateId,
        run: (ctx, args) => this.getOne(ctx, args),
      },
    };
  }

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** Runs `fn` against the BMC; its failures become Ironic's RedfishError with `message`'s text. */
  private async withBmc<T>(ctx: DriverContext, fn: (call: RedfishCall, paths: EventPaths) => Promise<T>, message: (error: string) => string, notFound = false): Promise<T> {
    try {
      return await this.client.run(ctx, async (call) => fn(call, await this.paths(call)));
    } catch (err) {
      if (!(err instanceof DriverError) || err instanceof RedfishError) throw err;
      const Err = notFound ? RedfishErrorNotFound : RedfishError;
      throw new Err(message(err.message));
    }
  }

  private paths(call: RedfishCall): Promise<EventPaths> {
    return call.endpoint.memo('events:paths', TOPOLOGY_TTL_MS, async (c) => {
      const root = await c.get('/redfish/v1');
      const service = linkPath(prop(root.body, 'EventService'));
      if (!service) throw new RedfishError(`The attribute EventService/@odata.id is missing from the resource ${root.path}`);
      const body = await c.get(service);
      const subscriptions = linkPath(prop(body.body, 'Subscriptions'));
      if (!subscriptions) throw new RedfishError(`The attribute Subscriptions is missing from the resource ${service}`);
      return { service, subscriptions };
    }, call);
  }

  /** A member of the collection by its Id, as sushy builds it (the collection's path, a separator, the Id). */
  private member(call: RedfishCall, paths: EventPaths, id: unknown): Promise<Resource> {
    return call.get(`${paths.subscriptions}/${pyStr(id)}`);
  }

  private async create(ctx: DriverContext, args: Args): Promise<Json> {
    const payload: Json = {
      Destination: args.Destination,
      Protocol: args.Protocol ?? 'Redfish',
      Context: args.Context ?? '',
      EventTypes: args.EventTypes ?? ['Alert'],
    };
    const headers = args.HttpHeaders;
    if (Array.isArray(headers) && headers.length) payload.HttpHeaders = headers;
    // The headers often carry credentials: the message names them, never their values.
    const shown = { ...payload, ...(payload.HttpHeaders ? { HttpHeaders: '***' } : {}) };
    const failed = (error: string) => `Failed to create subscription on node ${ctx.nodeUuid}. Subscription payload: ${pyStr(shown)}. Error: ${error}`;
    return this.withBmc(ctx, async (call, paths) => {
      if (args.EventTypes !== undefined) await this.checkEventTypes(call, paths, args.EventTypes);
      const what = `Redfish POST ${call.info.origin}${paths.subscriptions}`;
      const r = await call.send('POST', paths.subscriptions, { body: payload });
      if (r.status < 200 || r.status >= 300) throw statusError(r, what);
      const location = linkPath(r.headers.location ?? null) ?? linkPath(r.json());
      if (r.status !== 201 || !location) throw new RedfishError(failed(`${what}: HTTP ${r.status} without the new subscription's location`));
      return common((await call.get(location)).body);
    }, failed);
  }

  /** Ironic's check of EventTypes against the types the EventService offers (all of sushy's when it lists none). */
  private async checkEventTypes(call: RedfishCall, paths: EventPaths, types: unknown): Promise<void> {
    const listed = prop((await call.get(paths.service)).body, 'EventTypesForSubscription');
    const offered = Array.isArray(listed) && listed.length ? EVENT_TYPES.filter((t) => listed.includes(t)) : EVENT_TYPES;
    if (!Array.isArray(types) || !types.every((t) => typeof t === 'string' && offered.includes(t))) {
      throw new InvalidParameterValue(`EventTypes ${pyStr(types)} is not a valid value, allowed values {${offered.map((t) => pyRepr(t)).join(', ')}}`);
    }
  }

  private async remove(ctx: DriverContext, args: Args): Promise<null> {
    const failed = (error: string) => `Redfish delete_subscription failed for subscription ${pyStr(args.id)} on node ${ctx.nodeUuid}. Error: ${error}`;
    return this.withBmc(ctx, async (call, paths) => {
      const sub = await this.member(call, paths, args.id);
      const what = `Redfish DELETE ${call.info.origin}${sub.path}`;
      const r = await call.send('DELETE', sub.path);
      if (r.status < 200 || r.status >= 300) throw statusError(r, what);
      return null;
    }, failed, true);
  }

  private getAll(ctx: DriverContext): Promise<Json> {
    const failed = (error: string) => `Redfish get_subscriptions failed for node ${ctx.nodeUuid}. Error: ${error}`;
    return this.withBmc(ctx, async (call, paths) => (await call.get(paths.subscriptions)).body, failed);
  }

  private getOne(ctx: DriverContext, args: Args): Promise<Json> {
    const failed = (error: string) => `Redfish get_subscription failed for subscription ${pyStr(args.id)} on node ${ctx.nodeUuid}. Error: ${error}`;
    return this.withBmc(ctx, async (call, paths) => {
      const body = (await this.member(call, paths, args.id)).body;
      return isObject(body) ? common(body) : {};
    }, failed);
  }
}
