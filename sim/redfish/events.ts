/**
 * The EventService of a simulated BMC: its `Subscriptions` collection (EventDestination
 * resources), created with POST, read, and deleted. A BMC starts with the subscriptions its
 * model records (a mockup's), and checks a new one as bmcweb and iLO do: a JSON object of
 * known properties, an http(s) Destination with a host, a Protocol and EventTypes it offers,
 * string Context, HttpHeaders a list of objects, and at most MAX_SUBSCRIPTIONS. No event is
 * ever delivered. Every creation, deletion and refusal goes to the BMC's event log.
 */
import { normalisePath, type SimModel } from './model.js';
import { parseJsonObject, redfishError, type SimBmc } from './state.js';
import type { Reply } from './vmedia.js';

type Json = Record<string, unknown>;

const V1 = '/redfish/v1';
/** What bmcweb allows; iLO allows fewer. */
const MAX_SUBSCRIPTIONS = 20;
/** bmcweb's limit on Context. */
const MAX_CONTEXT = 256;
/** Redfish EventType values, offered when the service does not list its own. */
const ALL_EVENT_TYPES = ['StatusChange', 'ResourceUpdated', 'ResourceAdded', 'ResourceRemoved', 'Alert', 'MetricReport', 'Other'];
const WRITABLE = new Set(['Destination', 'EventTypes', 'Context', 'Protocol', 'HttpHeaders', 'RegistryPrefixes', 'ResourceTypes', 'MessageIds', 'OriginResources', 'SubordinateResources', 'DeliveryRetryPolicy', 'EventFormatType', 'SubscriptionType', 'Name', 'Oem']);

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function odataId(v: unknown): string | null {
  return isObject(v) && typeof v['@odata.id'] === 'string' ? v['@odata.id'] : null;
}

function parse(text: string | null): Json | null {
  return text === null ? null : parseJsonObject(text);
}

const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({ status, body: JSON.stringify(body), headers });
const refusal = (status: number, id: string, message: string, related?: string[]): Reply => ({ status, body: redfishError(id, message, related) });

/** Where a model's EventService and its collection are, as served (canonical case). */
interface Layout {
  service: string;
  collection: string;
  eventTypes: readonly string[];
  protocols: readonly string[];
}

/** One BMC's subscriptions, by their `@odata.id`, in creation order. */
interface Subscriptions {
  members: Map<string, Json>;
  nextId: number;
}

/** A Destination a BMC can send events to: an absolute http(s) URL with a host. */
function destinationProblem(v: unknown): string | null {
  if (typeof v !== 'string') return `The value ${JSON.stringify(v)} for the property Destination is of a different type than the property can accept.`;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return `The value ${JSON.stringify(v)} for the property Destination is of a different format than the property can accept.`;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) {
    return `The value ${JSON.stringify(v)} for the property Destination is not in the list of acceptable values.`;
  }
  return null;
}

export class EventService {
  private readonly layout: Layout | null;
  private readonly state = new WeakMap<SimBmc, Subscriptions>();

  constructor(private readonly model: SimModel) {
    this.layout = this.findLayout();
  }

  /** Links followed from the service root, as a client finds them. */
  private findLayout(): Layout | null {
    const root = parse(this.model.get(V1, '', 0));
    const service = odataId(root?.EventService);
    if (!service) return null;
    const body = parse(this.model.get(normalisePath(service), '', 0));
    const collection = odataId(body?.Subscriptions);
    if (!body || !collection) return null;
    const listed = Array.isArray(body.EventTypesForSubscription) ? body.EventTypesForSubscription.filter((t): t is string => typeof t === 'string') : [];
    // bmcweb also takes SNMPv2c; nothing here sends SNMP traps.
    return { service: normalisePath(service), collection: collection.replace(/\/+$/, ''), eventTypes: listed.length ? listed : ALL_EVENT_TYPES, protocols: ['Redfish'] };
  }

  /** Whether `path` (normalised) is the collection or one of its members. */
  handles(path: string): boolean {
    if (!this.layout) return false;
    const coll = normalisePath(this.layout.collection);
    return path === coll || path.startsWith(`${coll}/`);
  }

  /** The recorded subscriptions, copied for this BMC on first use. */
  private subs(bmc: SimBmc): Subscriptions {
    let s = this.state.get(bmc);
    if (s) return s;
    s = { members: new Map(), nextId: 1 };
    const coll = parse(this.model.get(normalisePath(this.layout!.collection), '', bmc.index));
    const ids = Array.isArray(coll?.Members) ? coll.Members.map(odataId).filter((id): id is string => id !== null) : [];
    for (const id of ids) {
      const body = parse(this.model.get(normalisePath(id), '', bmc.index));
      if (!body) continue;
      s.members.set(id, body);
      const n = Number(id.slice(id.lastIndexOf('/') + 1));
      if (Number.isInteger(n)) s.nextId = Math.max(s.nextId, n + 1);
    }
    this.state.set(bmc, s);
    return s;
  }

  private member(bmc: SimBmc, path: string): [string, Json] | undefined {
    return [...this.subs(bmc).members].find(([id]) => normalisePath(id) === path);
  }

  handle(bmc: SimBmc, method: string, path: string, body: string): Reply {
    const layout = this.layout!;
    if (path === normalisePath(layout.collection)) {
      if (method === 'GET') return this.list(bmc);
      if (method === 'POST') return this.create(bmc, body);
      return { ...refusal(405, 'OperationNotAllowed', `${method} is not allowed on ${layout.collection}`), headers: { allow: 'GET, POST' } };
    }
    const found = this.member(bmc, path);
    if (!found) return refusal(404, 'ResourceMissingAtURI', `The resource at the URI ${path} was not found.`);
    const [id, sub] = found;
    if (method === 'GET') return json(200, sub);
    if (method === 'DELETE') {
      this.subs(bmc).members.delete(id);
      bmc.event('subscription-deleted', { id, destination: sub.Destination });
      return { status: 204 };
    }
    return { ...refusal(405, 'OperationNotAllowed', `${method} is not allowed on ${id}`), headers: { allow: 'GET, DELETE' } };
  }

  private list(bmc: SimBmc): Reply {
    const layout = this.layout!;
    const members = [...this.subs(bmc).members.keys()].map((id) => ({ '@odata.id': id }));
    return json(200, {
      '@odata.type': '#EventDestinationCollection.EventDestinationCollection',
      '@odata.id': layout.collection,
      Name: 'Event Subscriptions Collection',
      'Members@odata.count': members.length,
      Members: members,
    });
  }

  private refuse(bmc: SimBmc, reply: Reply, detail: Json): Reply {
    bmc.event('refused', { call: 'POST Subscriptions', status: reply.status, ...detail });
    return reply;
  }

  private create(bmc: SimBmc, text: string): Reply {
    const layout = this.layout!;
    const b = parseJsonObject(text);
    if (!b) return this.refuse(bmc, refusal(400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.'), {});
    const unknown = Object.keys(b).find((k) => !WRITABLE.has(k));
    if (unknown) return this.refuse(bmc, refusal(400, 'PropertyUnknown', `The property ${unknown} is not in the list of valid properties for the resource.`, [`#/${unknown}`]), { property: unknown });
    if (b.Destination === undefined) return this.refuse(bmc, refusal(400, 'PropertyMissing', 'The property Destination is a required property and must be included in the request.', ['#/Destination']), {});
    const bad = destinationProblem(b.Destination);
    if (bad) return this.refuse(bmc, refusal(400, 'PropertyValueFormatError', bad, ['#/Destination']), { destination: b.Destination });
    const protocol = b.Protocol ?? 'Redfish';
    if (typeof protocol !== 'string' || !layout.protocols.includes(protocol)) {
      return this.refuse(bmc, refusal(400, 'PropertyValueNotInList', `The value ${JSON.stringify(protocol)} for the property Protocol is not in the list of acceptable values.`, ['#/Protocol']), { protocol });
    }
    const context = b.Context ?? '';
    if (typeof context !== 'string' || context.length > MAX_CONTEXT) {
      return this.refuse(bmc, refusal(400, 'PropertyValueFormatError', `The value ${JSON.stringify(context)} for the property Context is of a different format than the property can accept.`, ['#/Context']), {});
    }
    const types = b.EventTypes ?? [];
    if (!Array.isArray(types) || types.some((t) => typeof t !== 'string')) {
      return this.refuse(bmc, refusal(400, 'PropertyValueTypeError', `The value ${JSON.stringify(types)} for the property EventTypes is of a different type than the property can accept.`, ['#/EventTypes']), {});
    }
    const offered = types.find((t) => !layout.eventTypes.includes(t as string));
    if (offered !== undefined) {
      return this.refuse(bmc, refusal(400, 'PropertyValueNotInList', `The value ${JSON.stringify(offered)} for the property EventTypes is not in the list of acceptable values.`, ['#/EventTypes']), { eventType: offered });
    }
    const headers = b.HttpHeaders ?? [];
    if (!Array.isArray(headers) || headers.some((h) => !isObject(h) || Object.values(h).some((v) => typeof v !== 'string'))) {
      return this.refuse(bmc, refusal(400, 'PropertyValueTypeError', 'The value for the property HttpHeaders is of a different type than the property can accept.', ['#/HttpHeaders']), {});
    }
    const s = this.subs(bmc);
    if (s.members.size >= MAX_SUBSCRIPTIONS) {
      return this.refuse(bmc, refusal(400, 'CreateLimitReachedForResource', 'The create operation failed because the resource has reached the limit of possible resources.'), {});
    }
    const n = String(s.nextId++);
    const id = `${layout.collection}/${n}`;
    // HttpHeaders are write-only: a read shows none (the Redfish schema), so secrets stay on the BMC.
    const sub: Json = {
      '@odata.type': '#EventDestination.v1_13_0.EventDestination',
      '@odata.id': id,
      Id: n,
      Name: `Event Subscription ${n}`,
      Destination: b.Destination,
      EventTypes: types.length ? types : ['Alert'],
      Context: context,
      Protocol: protocol,
      SubscriptionType: 'RedfishEvent',
      DeliveryRetryPolicy: 'TerminateAfterRetries',
    };
    s.members.set(id, sub);
    bmc.event('subscription-created', { id, destination: b.Destination, context, headers: headers.length });
    return json(201, sub, { location: id });
  }
}
