/**
 * Serves a recorded short-form mockup tree (DMTF's Mockup Creator layout: `<dir>/index.json`
 * is `GET /redfish/v1`, `<dir>/Systems/1/index.json` is `GET /redfish/v1/Systems/1`).
 * Lookup is case-insensitive and ignores a trailing slash, like iLO, so the lower-case links
 * HPE puts in its bodies resolve. Files are read on first use and shared by every BMC of the
 * process; the systems' power and boot state live per BMC on top of the recorded body.
 * Everything else is served as recorded, error objects with status 200 included, which is what
 * a static mockup server does; `$expand=.` is honoured one level deep when the recorded
 * service root advertises it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { defaultBoot, emptyMedia, normalisePath, STANDARD_BOOT_TARGETS, STANDARD_RESET_TYPES, type MediaSlot, type SimModel } from './model.js';
import { etagOf, type MediaState, type SystemState } from './state.js';

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function odataId(v: unknown): string | null {
  return isObject(v) && typeof v['@odata.id'] === 'string' ? v['@odata.id'] : null;
}

function decodeQuery(q: string): string {
  try {
    return decodeURIComponent(q);
  } catch {
    return q;
  }
}

/** Maps every normalised URL path of the tree to its index.json. */
function indexTree(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (abs: string, url: string) => {
    for (const entry of readdirSync(abs, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(path.join(abs, entry.name), `${url}/${entry.name}`);
      else if (entry.name === 'index.json') files.set(normalisePath(url || '/redfish/v1'), path.join(abs, entry.name));
    }
  };
  walk(dir, '/redfish/v1');
  if (!files.has('/redfish/v1')) throw new Error(`${dir} is not a Redfish mockup tree: no index.json at its top`);
  return files;
}

export class MockupModel implements SimModel {
  readonly systemPaths: ReadonlySet<string>;
  readonly sessionsPath: string;
  private readonly files: Map<string, string>;
  private readonly text = new Map<string, string>();
  private readonly parsed = new Map<string, Json>();
  private readonly expandedText = new Map<string, string>();
  /** The root advertises `$expand=.` (ProtocolFeaturesSupported.ExpandQuery.NoLinks). */
  private readonly expands: boolean;
  readonly mediaSlots: ReadonlyMap<string, MediaSlot>;
  readonly mediaActions: ReadonlyMap<string, { slot: MediaSlot; action: 'insert' | 'eject' }>;

  constructor(readonly dir: string) {
    this.files = indexTree(dir);
    const root = this.json('/redfish/v1') ?? {};
    const systemsPath = normalisePath(odataId(root.Systems) ?? '/redfish/v1/Systems');
    const members = this.json(systemsPath)?.Members;
    const systems = new Set<string>();
    if (Array.isArray(members)) for (const m of members) if (odataId(m)) systems.add(normalisePath(odataId(m) as string));
    this.systemPaths = systems;
    const links = isObject(root.Links) ? root.Links : {};
    this.sessionsPath = normalisePath(odataId(links.Sessions) ?? '/redfish/v1/SessionService/Sessions');
    const features = isObject(root.ProtocolFeaturesSupported) ? root.ProtocolFeaturesSupported : {};
    this.expands = isObject(features.ExpandQuery) && features.ExpandQuery.NoLinks === true;
    const slots = new Map<string, MediaSlot>();
    const actions = new Map<string, { slot: MediaSlot; action: 'insert' | 'eject' }>();
    for (const sys of systems) {
      for (const slot of this.findSlots(sys)) {
        if (slots.has(slot.path)) continue;
        slots.set(slot.path, slot);
        if (slot.insertTarget) actions.set(slot.insertTarget, { slot, action: 'insert' });
        if (slot.ejectTarget) actions.set(slot.ejectTarget, { slot, action: 'eject' });
      }
    }
    this.mediaSlots = slots;
    this.mediaActions = actions;
  }

  /**
   * The recorded VirtualMedia of a system, found as Ironic looks: the system's own
   * `VirtualMedia` collection (newer iDRAC, DMTF), else those of the managers in
   * `Links.ManagedBy`.
   */
  private findSlots(sys: string): MediaSlot[] {
    const body = this.json(sys) ?? {};
    const collections: string[] = [];
    const own = odataId(body.VirtualMedia);
    if (own) collections.push(own);
    else {
      const links = isObject(body.Links) ? body.Links : {};
      const managers = Array.isArray(links.ManagedBy) ? links.ManagedBy : [];
      for (const m of managers) {
        const id = odataId(m);
        const vm = id ? odataId(this.json(normalisePath(id))?.VirtualMedia) : null;
        if (vm) collections.push(vm);
      }
    }
    const out: MediaSlot[] = [];
    for (const c of collections) {
      const members = this.json(normalisePath(c))?.Members;
      if (!Array.isArray(members)) continue;
      for (const member of members) {
        const id = odataId(member);
        const slotBody = id ? this.json(normalisePath(id)) : null;
        if (!id || !slotBody) continue;
        const acts = isObject(slotBody.Actions) ? slotBody.Actions : {};
        const target = (name: string): string | null => {
          const a = acts[name];
          return isObject(a) && typeof a.target === 'string' ? normalisePath(a.target) : null;
        };
        out.push({
          id: typeof slotBody['@odata.id'] === 'string' ? slotBody['@odata.id'] : id,
          path: normalisePath(id),
          system: sys,
          mediaTypes: Array.isArray(slotBody.MediaTypes) ? slotBody.MediaTypes.filter((t): t is string => typeof t === 'string') : [],
          insertTarget: target('#VirtualMedia.InsertMedia'),
          ejectTarget: target('#VirtualMedia.EjectMedia'),
        });
      }
    }
    return out;
  }

  /** The recorded media of a slot (the DMTF mockup ships with its CD inserted). */
  initialMedia(slot: MediaSlot): MediaState {
    const b = this.json(slot.path) ?? {};
    const m = emptyMedia();
    if (typeof b.Image === 'string') m.image = b.Image;
    if (typeof b.ImageName === 'string') m.imageName = b.ImageName;
    if (typeof b.Inserted === 'boolean') m.inserted = b.Inserted;
    if (typeof b.WriteProtected === 'boolean') m.writeProtected = b.WriteProtected;
    if (typeof b.ConnectedVia === 'string') m.connectedVia = b.ConnectedVia;
    if (typeof b.TransferProtocolType === 'string') m.transferProtocolType = b.TransferProtocolType;
    return m;
  }

  /** The recorded body with the live media state; keys the vendor does not have stay absent. */
  mediaBody(slot: MediaSlot, v: MediaState): string {
    const body = { ...(this.json(slot.path) ?? {}) };
    body.Image = v.image;
    if ('ImageName' in body) body.ImageName = v.imageName;
    body.Inserted = v.inserted;
    body.WriteProtected = v.writeProtected;
    if ('ConnectedVia' in body) body.ConnectedVia = v.connectedVia;
    if ('TransferProtocolType' in body || v.transferProtocolType) body.TransferProtocolType = v.transferProtocolType;
    if ('@odata.etag' in body) body['@odata.etag'] = etagOf(v);
    return JSON.stringify(body);
  }

  private raw(p: string): string | null {
    const file = this.files.get(p);
    if (!file) return null;
    let t = this.text.get(p);
    if (t === undefined) {
      t = readFileSync(file, 'utf8');
      this.text.set(p, t);
    }
    return t;
  }

  private json(p: string): Json | null {
    let j = this.parsed.get(p);
    if (j) return j;
    const t = this.raw(p);
    if (t === null) return null;
    try {
      const v: unknown = JSON.parse(t);
      j = isObject(v) ? v : {};
    } catch {
      j = {};
    }
    this.parsed.set(p, j);
    return j;
  }

  private resetAction(p: string): Json {
    const actions = this.json(p)?.Actions;
    const reset = isObject(actions) ? actions['#ComputerSystem.Reset'] : undefined;
    return isObject(reset) ? reset : {};
  }

  initialSystem(p: string): SystemState {
    const body = this.json(p) ?? {};
    const boot = isObject(body.Boot) ? body.Boot : {};
    const d = defaultBoot();
    return {
      power: body.PowerState === 'Off' ? 'Off' : 'On',
      boot: {
        BootSourceOverrideTarget: typeof boot.BootSourceOverrideTarget === 'string' ? boot.BootSourceOverrideTarget : d.BootSourceOverrideTarget,
        BootSourceOverrideEnabled: typeof boot.BootSourceOverrideEnabled === 'string' ? boot.BootSourceOverrideEnabled : d.BootSourceOverrideEnabled,
        BootSourceOverrideMode: typeof boot.BootSourceOverrideMode === 'string' ? boot.BootSourceOverrideMode : d.BootSourceOverrideMode,
      },
      version: 1,
      running: body.PowerState === 'Off' ? null : { device: 'Hdd', image: null, slot: null, phase: 'up', since: Math.round(Date.now()) },
    };
  }

  systemBody(p: string, state: SystemState): string {
    const body = { ...(this.json(p) ?? {}) };
    body.PowerState = state.power;
    // Systems recorded without a Boot object (EX425 blades) keep having none.
    if (isObject(body.Boot)) body.Boot = { ...body.Boot, ...state.boot };
    return JSON.stringify(body);
  }

  resetTarget(p: string): string {
    const target = this.resetAction(p).target;
    return normalisePath(typeof target === 'string' ? target : `${p}/Actions/ComputerSystem.Reset`);
  }

  resetTypes(p: string): readonly string[] {
    const reset = this.resetAction(p);
    const inline = reset['ResetType@Redfish.AllowableValues'];
    if (Array.isArray(inline)) return inline.filter((v): v is string => typeof v === 'string');
    const infoPath = reset['@Redfish.ActionInfo'];
    if (typeof infoPath === 'string') {
      const params = this.json(normalisePath(infoPath))?.Parameters;
      if (Array.isArray(params)) {
        for (const param of params) {
          if (isObject(param) && param.Name === 'ResetType' && Array.isArray(param.AllowableValues)) {
            return param.AllowableValues.filter((v): v is string => typeof v === 'string');
          }
        }
      }
    }
    return STANDARD_RESET_TYPES;
  }

  bootTargets(p: string): readonly string[] | null {
    const boot = this.json(p)?.Boot;
    if (!isObject(boot)) return null;
    const allowed = boot['BootSourceOverrideTarget@Redfish.AllowableValues'];
    return Array.isArray(allowed) ? allowed.filter((v): v is string => typeof v === 'string') : STANDARD_BOOT_TARGETS;
  }

  get(p: string, query: string): string | null {
    if (this.expands && /(^|&)\$expand=\.(\(|&|$)/.test(decodeQuery(query))) return this.expanded(p);
    return this.raw(p);
  }

  /**
   * `$expand=.` one level deep, as the root advertises it: a collection's Members, or a
   * resource's own subordinate links (not those under Links), replaced by their bodies.
   */
  private expanded(p: string): string | null {
    let t = this.expandedText.get(p);
    if (t !== undefined) return t;
    const body = this.json(p);
    if (body === null) return null;
    const inline = (v: unknown): unknown => {
      const id = Object.keys(isObject(v) ? v : {}).length === 1 ? odataId(v) : null;
      return (id && this.json(normalisePath(id))) ?? v;
    };
    const out: Json = {};
    for (const [k, v] of Object.entries(body)) {
      if (k === 'Members' && Array.isArray(v)) out[k] = v.map(inline);
      else out[k] = k === 'Links' || k === 'Actions' ? v : inline(v);
    }
    t = JSON.stringify(out);
    this.expandedText.set(p, t);
    return t;
  }

  isPublic(p: string): boolean {
    return p === '/redfish' || p === '/redfish/v1' || p === '/redfish/v1/odata' || p === '/redfish/v1/$metadata';
  }
}
