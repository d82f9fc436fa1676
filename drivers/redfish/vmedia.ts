/**
 * Virtual media as Ironic's `redfish-virtual-media` boot interface drives it through sushy
 * (ironic/drivers/modules/redfish/boot.py, sushy resources/manager/virtual_media.py): finding
 * the slots, ejecting and inserting, with the vendor workarounds sushy carries. Every request
 * goes through the node's `RedfishCall`, so the per-BMC limit, session and deadline apply.
 */
import { BmcBadResponse, BmcRejected, VirtualMediaUnavailable } from '../../common/errors.js';
import { pause } from './http.js';
import { statusError, type RedfishCall, type Reply } from './client.js';
import { errorMessage, isErrorBody, isObject, linkPath, linkPaths, messageIds, prop, str, type Json } from './odata.js';
import { TOPOLOGY_TTL_MS, getSystem, inTurn, isMissing } from './system.js';

/** A Redfish VirtualMediaType. */
export type MediaType = 'CD' | 'DVD' | 'USBStick' | 'Floppy';

/** How often and how far apart a slot refusing with 5xx (Dell: an eject still in progress) is tried. */
export interface VirtualMediaRetry {
  attempts: number;
  intervalMs: number;
}

/** Ironic retries an insert 3 times, 3 s apart (boot.py `_insert_vmedia_in_resource`). */
export const DEFAULT_VMEDIA_RETRY: Readonly<VirtualMediaRetry> = Object.freeze({ attempts: 3, intervalMs: 3000 });

/** One VirtualMedia resource as read now. */
export interface Slot {
  path: string;
  id: string;
  mediaTypes: string[];
  inserted: boolean;
  image: string | null;
  etag: string | null;
  /** The resource's GET answered `Allow` with PATCH: sushy's fallback when there is no action. */
  allowPatch: boolean;
  insertTarget: string | null;
  ejectTarget: string | null;
}

function header(r: Reply, name: string): string | null {
  const v = r.headers[name];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

/** A GET that keeps the headers (Allow, ETag), which `RedfishCall.get` drops. */
async function read(call: RedfishCall, path: string): Promise<{ body: Json; etag: string | null; allow: string | null }> {
  const what = `Redfish GET ${call.info.origin}${path}`;
  const r = await call.send('GET', path);
  if (r.status < 200 || r.status >= 300) throw statusError(r, what);
  const body = r.json();
  if (!body || isErrorBody(body)) throw new BmcBadResponse(`${what}: the answer is not a Redfish resource`);
  const etag = header(r, 'etag') ?? str(body['@odata.etag']);
  return { body, etag, allow: header(r, 'allow') };
}

function actionTarget(body: Json, name: string): string | null {
  const actions = prop(body, 'Actions');
  const action = isObject(actions) ? prop(actions, name) : undefined;
  return isObject(action) ? linkPath(action.target) : null;
}

/** Reads one slot. @throws BmcRejected | BmcBadResponse | BmcTimeout | BmcUnreachable */
export async function readSlot(call: RedfishCall, path: string): Promise<Slot> {
  const { body, etag, allow } = await read(call, path);
  const types = prop(body, 'MediaTypes');
  return {
    path,
    id: str(body.Id) ?? path,
    mediaTypes: Array.isArray(types) ? types.filter((t): t is string => typeof t === 'string') : [],
    inserted: prop(body, 'Inserted') === true,
    image: str(prop(body, 'Image')) || null,
    etag,
    allowPatch: allow !== null && /\bPATCH\b/i.test(allow),
    insertTarget: actionTarget(body, '#VirtualMedia.InsertMedia'),
    ejectTarget: actionTarget(body, '#VirtualMedia.EjectMedia'),
  };
}

/**
 * The VirtualMedia collections of the node: the System's own (newer iDRAC), else those of
 * the managers in `Links.ManagedBy`, as Ironic's `_has_vmedia_via_systems` decides.
 */
export async function findCollections(call: RedfishCall): Promise<string[]> {
  const system = await getSystem(call);
  const own = linkPath(prop(system.body, 'VirtualMedia'));
  if (own) return [own];
  const links = prop(system.body, 'Links');
  const managers = isObject(links) ? linkPaths(prop(links, 'ManagedBy')) : [];
  // Where a manager keeps its virtual media does not change: read once per manager for
  // TOPOLOGY_TTL_MS, as the system's path is (one GET fewer at each boot, eject and tear-down).
  const found = await inTurn(call, managers.map((m) => () => call.endpoint.memo(`vmedia:${m}`, TOPOLOGY_TTL_MS, async (c) => {
    try {
      return linkPath(prop((await c.get(m)).body, 'VirtualMedia'));
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }, call)));
  return found.filter((p): p is string => p !== null);
}

/** Forgets where the managers keep their virtual media: a collection found there has gone. */
function forgetCollections(call: RedfishCall): void {
  call.endpoint.forget('vmedia:');
}

/** The slots of a collection, read now. */
export async function readSlots(call: RedfishCall, collection: string): Promise<Slot[]> {
  let members: string[];
  try {
    members = [...new Set(linkPaths(prop((await call.get(collection)).body, 'Members')))];
  } catch (err) {
    if (isMissing(err)) {
      forgetCollections(call);
      return [];
    }
    throw err;
  }
  return inTurn(call, members.map((m) => () => readSlot(call, m)));
}

/**
 * The slots fit for `type`, best first. A CD is also put into a slot that offers only DVD
 * (Cisco UCS, Ironic bug 2031595), after the slots that offer CD.
 */
export function slotsFor(slots: Slot[], type: MediaType): Slot[] {
  const exact = slots.filter((s) => s.mediaTypes.includes(type));
  if (type !== 'CD') return exact;
  return [...exact, ...slots.filter((s) => !s.mediaTypes.includes('CD') && s.mediaTypes.includes('DVD'))];
}

function describe(call: RedfishCall, slot: Slot): string {
  return `virtual media ${slot.id} (${call.info.origin}${slot.path})`;
}

function failed(r: Reply): boolean {
  return r.status < 200 || r.status >= 300;
}

/** A PATCH of the slot itself with If-Match, retried once with a fresh ETag on 412/428. */
async function patchSlot(call: RedfishCall, slot: Slot, body: Json): Promise<Reply> {
  const send = (etag: string | null) => call.send('PATCH', slot.path, { body, headers: etag ? { 'if-match': etag } : {} });
  let r = await send(slot.etag);
  if (r.status === 412 || r.status === 428) r = await send((await readSlot(call, slot.path)).etag ?? '*');
  return r;
}

/**
 * Ejects what a slot holds: POST EjectMedia with no body, then with `{}` on 400/415 (HPE iLO);
 * with no action, PATCH `{Image: null, Inserted: false}` where the slot allows PATCH. A
 * refusal of a slot that, read again, turns out empty is no failure (sushy 7d7ee4b).
 * @throws VirtualMediaUnavailable when the slot cannot be ejected at all; BmcRejected when the BMC refuses
 */
export async function ejectSlot(call: RedfishCall, slot: Slot): Promise<void> {
  let r: Reply;
  let what: string;
  if (slot.ejectTarget) {
    what = `Redfish POST ${call.info.origin}${slot.ejectTarget}`;
    r = await call.send('POST', slot.ejectTarget);
    if (r.status === 400 || r.status === 415) r = await call.send('POST', slot.ejectTarget, { body: {} });
  } else if (slot.allowPatch) {
    what = `Redfish PATCH ${call.info.origin}${slot.path}`;
    r = await patchSlot(call, slot, { Image: null, Inserted: false });
  } else {
    throw new VirtualMediaUnavailable(
      `Cannot eject ${describe(call, slot)}: it has no #VirtualMedia.EjectMedia action and does not allow PATCH; eject the image ${slot.image ?? ''} from the BMC's own interface.`,
    );
  }
  if (!failed(r)) return;
  if (r.status >= 500 || r.status === 400 || r.status === 409) {
    const now = await readSlot(call, slot.path);
    if (!now.inserted) return;
  }
  throw statusError(r, `Ejecting ${describe(call, slot)}: ${what}`);
}

/**
 * Waits until an ejected slot stops reporting `Inserted` (iDRAC keeps saying so for a while,
 * Ironic 1069c0f1e). Gives up quietly: the insert that follows tells whether it matters.
 */
async function waitEjected(call: RedfishCall, slot: Slot, retry: VirtualMediaRetry): Promise<void> {
  for (let i = 0; i < retry.attempts; i++) {
    if (!(await readSlot(call, slot.path)).inserted) return;
    if (i + 1 < retry.attempts) await pause(retry.intervalMs, call, `waiting for ${describe(call, slot)} to be ejected`);
  }
  call.log.warn({ bmc: call.info.origin, slot: slot.path }, 'Redfish virtual media still reports Inserted after an eject');
}

/**
 * Ejects every inserted slot of the given types in `collections`; true when one was. `unchanged`
 * gets the slots of each collection where nothing was ejected, as read: still current for an
 * insert that follows in the same call (insertImage), which need not read them again.
 * @throws VirtualMediaUnavailable | BmcRejected | BmcTimeout | BmcUnreachable
 */
export async function ejectAll(
  call: RedfishCall,
  collections: string[],
  types: readonly MediaType[],
  retry: VirtualMediaRetry,
  unchanged?: Map<string, Slot[]>,
): Promise<boolean> {
  let any = false;
  for (const c of collections) {
    const slots = await readSlots(call, c);
    if (!slots.some((slot) => slot.inserted && types.some((t) => slot.mediaTypes.includes(t)))) unchanged?.set(c, slots);
    for (const slot of slots) {
      if (!slot.inserted || !types.some((t) => slot.mediaTypes.includes(t))) continue;
      if (!slot.ejectTarget && !slot.allowPatch && !slot.insertTarget) {
        // Nothing can have been inserted here through Redfish (an applet or KVM mount): leave it.
        call.log.warn({ bmc: call.info.origin, slot: slot.path, image: slot.image }, 'Redfish virtual media slot has a medium but no action to eject it; left as it is');
        continue;
      }
      await ejectSlot(call, slot);
      await waitEjected(call, slot, retry);
      call.log.info({ bmc: call.info.origin, slot: slot.path, image: slot.image }, 'Redfish virtual media ejected');
      any = true;
    }
  }
  return any;
}

/** Sushy's test for a BMC that wants TransferProtocolType (ActionParameterMissing / PropertyMissing, or a GeneralError naming it). */
function wantsTransferProtocol(r: Reply): boolean {
  const body = r.json();
  const ids = messageIds(body);
  const text = errorMessage(body) ?? r.text;
  if (ids.some((id) => id.endsWith('GeneralError')) && text.includes('TransferProtocolType')) return true;
  if (!ids.some((id) => id.endsWith('ActionParameterMissing') || id.endsWith('PropertyMissing'))) return false;
  const related: string[] = [];
  const err = isObject(body) && isObject(body.error) ? body.error : {};
  const ext = err['@Message.ExtendedInfo'];
  if (Array.isArray(ext)) {
    for (const m of ext) {
      const rp = isObject(m) ? m.RelatedProperties : undefined;
      if (Array.isArray(rp)) related.push(...rp.filter((x): x is string => typeof x === 'string'));
    }
  }
  return related.some((p) => p.endsWith('/TransferProtocolType')) || (related.length === 0 && text.includes('TransferProtocolType'));
}

function wantsTransferMethod(r: Reply): boolean {
  const body = r.json();
  return messageIds(body).some((id) => id.endsWith('GeneralError')) && (errorMessage(body) ?? '').includes('TransferMethod');
}

/** What became of an insert into one slot. */
export type InsertOutcome = { ok: true } | { ok: false; skip: true; reason: string } | { ok: false; skip: false; error: Error };

/**
 * Inserts `image` into one slot. POST InsertMedia with `{Image}` only (Supermicro X11 refuses
 * Inserted/WriteProtected), adding TransferProtocolType or TransferMethod when the BMC says it
 * misses them; with no action, PATCH `{Image, Inserted, WriteProtected}` (Lenovo needs
 * Inserted). A slot without either, or one answering 400 or 405, is skipped, as Ironic skips
 * Cisco's internal vKVM and OpenBMC's local-only slots; anything else is an error.
 */
export async function insertSlot(call: RedfishCall, slot: Slot, image: string): Promise<InsertOutcome> {
  let r: Reply;
  let what: string;
  if (slot.insertTarget) {
    what = `Redfish POST ${call.info.origin}${slot.insertTarget}`;
    const payload: Json = { Image: image };
    r = await call.send('POST', slot.insertTarget, { body: payload });
    for (let i = 0; i < 2 && failed(r) && r.status < 500; i++) {
      if (payload.TransferProtocolType === undefined && wantsTransferProtocol(r)) {
        const scheme = /^([a-z]+):\/\//i.exec(image)?.[1]?.toUpperCase();
        if (!scheme) break;
        payload.TransferProtocolType = scheme;
      } else if (payload.TransferMethod === undefined && wantsTransferMethod(r)) {
        payload.TransferMethod = 'Stream';
      } else {
        break;
      }
      call.log.debug({ bmc: call.info.origin, slot: slot.path, payload: Object.keys(payload) }, 'Redfish InsertMedia retried with more parameters');
      r = await call.send('POST', slot.insertTarget, { body: payload });
    }
  } else if (slot.allowPatch) {
    what = `Redfish PATCH ${call.info.origin}${slot.path}`;
    r = await patchSlot(call, slot, { Image: image, Inserted: true, WriteProtected: true });
  } else {
    return { ok: false, skip: true, reason: `${describe(call, slot)} has no #VirtualMedia.InsertMedia action and does not allow PATCH` };
  }
  if (!failed(r)) return { ok: true };
  const error = statusError(r, `Inserting ${image} into ${describe(call, slot)}: ${what}`);
  if (r.status === 400 || r.status === 405) return { ok: false, skip: true, reason: error.message };
  return { ok: false, skip: false, error };
}

/**
 * Inserts `image` into the first slot of `type` that takes it, looking in each collection in
 * turn, after ejecting what the slots of that type hold. A collection whose slot answers 5xx
 * is tried again (`retry`), then the next one is.
 * @throws VirtualMediaUnavailable when no slot fits or takes it; BmcRejected for a refusal; BmcTimeout | BmcUnreachable
 */
export async function insertImage(
  call: RedfishCall,
  nodeUuid: string,
  collections: string[],
  type: MediaType,
  image: string,
  retry: VirtualMediaRetry,
  /** Slots just read in this call and unchanged since (see ejectAll), for a first attempt. */
  current?: ReadonlyMap<string, Slot[]>,
): Promise<Slot> {
  const errors: string[] = [];
  let lastServerError: BmcRejected | null = null;
  let slotsSeen = 0;
  for (const c of collections) {
    collection: for (let attempt = 1; ; attempt++) {
      const known = attempt === 1 ? current?.get(c) : undefined;
      const slots = slotsFor(known ?? await readSlots(call, c), type);
      slotsSeen += attempt === 1 ? slots.length : 0;
      for (const slot of slots) {
        if (!slot.insertTarget && !slot.allowPatch) {
          const reason = `${describe(call, slot)} has no #VirtualMedia.InsertMedia action and does not allow PATCH`;
          call.log.warn({ bmc: call.info.origin, slot: slot.path }, 'Redfish virtual media slot cannot take an image, skipped');
          errors.push(reason);
          continue;
        }
        if (slot.inserted) {
          await ejectSlot(call, slot);
          await waitEjected(call, slot, retry);
        }
        const out = await insertSlot(call, slot, image);
        if (out.ok) {
          call.log.info({ bmc: call.info.origin, slot: slot.path, image, type }, 'Redfish virtual media inserted');
          return slot;
        }
        if (out.skip) {
          call.log.warn({ bmc: call.info.origin, slot: slot.path, reason: out.reason }, 'Redfish virtual media slot skipped');
          errors.push(out.reason);
          continue;
        }
        if (out.error instanceof BmcRejected && (out.error.status ?? 0) >= 500) {
          lastServerError = out.error;
          if (!errors.includes(out.error.message)) errors.push(out.error.message);
          if (attempt < retry.attempts) {
            call.log.info({ bmc: call.info.origin, slot: slot.path, attempt }, 'Redfish virtual media insert refused with a server error, retrying');
            await pause(retry.intervalMs, call, `retrying the insert into ${describe(call, slot)}`);
            continue collection;
          }
          break collection;
        }
        throw out.error;
      }
      break;
    }
  }
  if (slotsSeen === 0) {
    const where = collections.length ? `its virtual media (${collections.join(', ')}) has no ${type === 'CD' ? 'CD or DVD' : type} slot` : 'the BMC offers no virtual media for this system';
    throw new VirtualMediaUnavailable(`No suitable virtual media device found for node ${nodeUuid} to mount image ${image}: ${where}.`);
  }
  const detail = errors.length <= 1 || errors[0] === errors[errors.length - 1]
    ? `Error: ${errors[0] ?? 'no slot took it'}`
    : `First error: ${errors[0]}. Last error: ${errors[errors.length - 1]}`;
  const message = `Virtual media mount failed for node ${nodeUuid} with image ${image}. ${detail}`;
  // A server error is worth another try later (an eject still in progress); a refusal is not.
  if (lastServerError) throw new BmcRejected(message, lastServerError.status);
  throw new VirtualMediaUnavailable(message);
}
