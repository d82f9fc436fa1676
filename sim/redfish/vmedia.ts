/**
 * Virtual media of a simulated BMC: GET and PATCH of a slot, InsertMedia and EjectMedia, what
 * a boot finds in the slots, and the vendor quirks around them (quirks.ts). Every refusal
 * and every change goes to the BMC's event log.
 */
import type { MediaSlot, SimModel } from './model.js';
import type { VmediaQuirks } from './quirks.js';
import { etagOf, parseJsonObject, redfishError, type MediaState, type Running, type SimBmc, type SystemState } from './state.js';

/** When the BMC fetches the image: never, at insert (a 404 refuses it) or at boot (a 404 fails the boot). */
export type ImageCheck = 'none' | 'insert' | 'boot';

/** An answer for the handler to send. */
export interface Reply {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

const TRANSFER_PROTOCOLS = new Set(['CIFS', 'FTP', 'SFTP', 'HTTP', 'HTTPS', 'NFS', 'SCP', 'TFTP', 'OEM']);
const PROBE_TIMEOUT_MS = 5000;

/**
 * What a BMC that really mounts its images does with them (the QEMU-backed hosts, sim/qemu):
 * told of every insert before it takes effect, and of every eject.
 */
export interface MediaHooks {
  /** Fetches the image (and puts it into a running host); resolves with null, or why it cannot be had. */
  insert(bmc: SimBmc, slot: MediaSlot, image: string): Promise<string | null>;
  ejected(bmc: SimBmc, slot: MediaSlot): void;
}

function nowMs(): number {
  return Date.now();
}

function imageName(url: string): string {
  const path = url.replace(/[?#].*$/, '');
  return path.slice(path.lastIndexOf('/') + 1);
}

function protocolOf(url: string): string | null {
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(url);
  const scheme = m ? m[1].toUpperCase() : null;
  return scheme && TRANSFER_PROTOCOLS.has(scheme) ? scheme : null;
}

/**
 * Fetches the image as a BMC would before mounting it: HEAD, then GET when HEAD is not
 * allowed. Resolves with null when it is there, else with why not. Schemes other than
 * HTTP(S) are taken as reachable.
 */
export async function probeImage(url: string): Promise<string | null> {
  if (!/^https?:\/\//i.test(url)) return null;
  try {
    let res = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    if (res.status === 405 || res.status === 501) {
      res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
      await res.body?.cancel();
    }
    return res.status >= 200 && res.status < 400 ? null : `${url} answered ${res.status}`;
  } catch (err) {
    return `${url} could not be fetched: ${(err as Error).message}`;
  }
}

function stripWeak(tag: string): string {
  return tag.trim().replace(/^W\//, '');
}

export class VirtualMedia {
  hooks?: MediaHooks;

  constructor(
    private readonly model: SimModel,
    private readonly quirks: Readonly<VmediaQuirks>,
    private readonly check: ImageCheck,
  ) {}

  /** The slot's state, made on first use. */
  state(bmc: SimBmc, slot: MediaSlot): MediaState {
    let m = bmc.media.get(slot.path);
    if (!m) {
      m = this.model.initialMedia(slot);
      bmc.media.set(slot.path, m);
    }
    return m;
  }

  /** What a GET shows: right after an eject, a sticky BMC still shows what was inserted. */
  view(bmc: SimBmc, slot: MediaSlot): MediaState {
    const m = this.state(bmc, slot);
    if (this.quirks.stickyInsertedMs > 0 && m.before && nowMs() - m.ejectedAt < this.quirks.stickyInsertedMs) return { ...m, ...m.before };
    return m;
  }

  get(bmc: SimBmc, slot: MediaSlot): Reply {
    const m = this.state(bmc, slot);
    return { status: 200, body: this.model.mediaBody(slot, this.view(bmc, slot)), headers: { etag: etagOf(m), allow: 'GET, PATCH' } };
  }

  private refuse(bmc: SimBmc, slot: MediaSlot, call: string, status: number, messageId: string, message: string, related?: string[]): Reply {
    bmc.event('refused', { call, slot: slot.id, status, messageId });
    return { status, body: redfishError(messageId, message, related) };
  }

  /** `POST …/InsertMedia`. */
  async insertAction(bmc: SimBmc, slot: MediaSlot, text: string): Promise<Reply> {
    const args = parseJsonObject(text);
    if (!args) return this.refuse(bmc, slot, 'InsertMedia', 400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    if (this.quirks.supermicro) {
      const extra = ['Inserted', 'WriteProtected'].filter((k) => k in args);
      if (extra.length) {
        return this.refuse(bmc, slot, 'InsertMedia', 400, 'ActionParameterNotSupported', `The parameter ${extra[0]} for the action VirtualMedia.InsertMedia is not supported on the target resource.`, extra.map((k) => `#/${k}`));
      }
    }
    if (this.quirks.needsTransferProtocol && args.TransferProtocolType === undefined) {
      return this.refuse(bmc, slot, 'InsertMedia', 400, 'ActionParameterMissing', 'The action VirtualMedia.InsertMedia requires the parameter TransferProtocolType to be present in the request body.', ['#/TransferProtocolType']);
    }
    return this.insert(bmc, slot, args, 'InsertMedia');
  }

  private async insert(bmc: SimBmc, slot: MediaSlot, args: Record<string, unknown>, call: 'InsertMedia' | 'PATCH'): Promise<Reply> {
    const refused = bmc.faults.insertMediaStatus;
    if (refused === 500) return this.refuse(bmc, slot, call, 500, 'InternalError', 'The request failed due to an internal service error.  The service is still operational.');
    if (refused >= 400) return this.refuse(bmc, slot, call, refused, 'GeneralError', 'A general error has occurred: the virtual media could not be inserted.');
    const image = args.Image;
    if (typeof image !== 'string' || !image) {
      return this.refuse(bmc, slot, call, 400, 'ActionParameterMissing', 'The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.', ['#/Image']);
    }
    const tpt = args.TransferProtocolType;
    if (tpt !== undefined && (typeof tpt !== 'string' || !TRANSFER_PROTOCOLS.has(tpt))) {
      return this.refuse(bmc, slot, call, 400, 'ActionParameterValueNotInList', `The value ${JSON.stringify(tpt)} for the parameter TransferProtocolType is not in the list of acceptable values.`, ['#/TransferProtocolType']);
    }
    for (const key of ['Inserted', 'WriteProtected'] as const) {
      if (args[key] !== undefined && typeof args[key] !== 'boolean') {
        return this.refuse(bmc, slot, call, 400, 'ActionParameterValueTypeError', `The value for the parameter ${key} is of a different type than the parameter can accept.`, [`#/${key}`]);
      }
    }
    const m = this.state(bmc, slot);
    if (this.quirks.ejectInProgressMs > 0 && m.ejectedAt > 0 && nowMs() - m.ejectedAt < this.quirks.ejectInProgressMs) {
      return this.refuse(bmc, slot, call, 500, 'InternalError', 'The request failed due to an internal service error: a virtual media operation is still in progress.');
    }
    if (m.inserted && !this.quirks.replaceInserted) {
      return this.refuse(bmc, slot, call, 400, 'ResourceInUse', 'The change to the requested resource failed because the resource is in use or in transition.');
    }
    if (this.check === 'insert') {
      const problem = await probeImage(image);
      if (problem) return this.refuse(bmc, slot, call, 400, 'GeneralError', `The remote file location is not accessible or reachable: ${problem}.`, ['#/Image']);
    }
    if (this.hooks) {
      const problem = await this.hooks.insert(bmc, slot, image);
      if (problem) return this.refuse(bmc, slot, call, 400, 'GeneralError', `The remote file location is not accessible or reachable: ${problem}.`, ['#/Image']);
    }
    m.image = image;
    m.imageName = imageName(image);
    m.inserted = args.Inserted !== false;
    m.writeProtected = args.WriteProtected !== false;
    m.connectedVia = 'URI';
    m.transferProtocolType = typeof tpt === 'string' ? tpt : protocolOf(image);
    m.userName = typeof args.UserName === 'string' ? args.UserName : '';
    m.before = undefined;
    m.version++;
    bmc.event('insert', { slot: slot.id, image, via: call });
    return { status: 204 };
  }

  /** `POST …/EjectMedia`. */
  ejectAction(bmc: SimBmc, slot: MediaSlot, text: string): Reply {
    if (text.trim() === '' && this.quirks.iloEject) {
      return this.refuse(bmc, slot, 'EjectMedia', 400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    }
    if (text.trim() !== '' && !parseJsonObject(text)) {
      return this.refuse(bmc, slot, 'EjectMedia', 400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    }
    return this.eject(bmc, slot, 'EjectMedia');
  }

  private eject(bmc: SimBmc, slot: MediaSlot, call: 'EjectMedia' | 'PATCH'): Reply {
    const m = this.state(bmc, slot);
    // Ejecting an empty slot is no error, as on sushy-tools.
    if (!m.inserted && !m.image) return { status: 204 };
    const image = m.image;
    m.before = { image: m.image, imageName: m.imageName, inserted: m.inserted, writeProtected: m.writeProtected, connectedVia: m.connectedVia, transferProtocolType: m.transferProtocolType };
    m.image = '';
    m.imageName = '';
    m.inserted = false;
    m.writeProtected = true;
    m.connectedVia = 'NotConnected';
    m.transferProtocolType = null;
    m.userName = '';
    m.ejectedAt = nowMs();
    m.version++;
    bmc.event('eject', { slot: slot.id, image, via: call });
    this.hooks?.ejected(bmc, slot);
    return { status: 204 };
  }

  /** `PATCH` of a slot: `{Image, Inserted, WriteProtected}` inserts, `{Image: null, Inserted: false}` ejects. */
  async patch(bmc: SimBmc, slot: MediaSlot, ifMatch: string | undefined, text: string): Promise<Reply> {
    const m = this.state(bmc, slot);
    if (ifMatch !== undefined) {
      if (ifMatch.trim() !== '*' && stripWeak(ifMatch) !== stripWeak(etagOf(m))) {
        return this.refuse(bmc, slot, 'PATCH', 412, 'PreconditionFailed', 'The ETag supplied did not match the ETag required to change this resource.');
      }
    } else if (bmc.faults.requireIfMatch || this.quirks.patchOnly) {
      return this.refuse(bmc, slot, 'PATCH', 428, 'PreconditionRequired', 'A precondition header or annotation is required to change this resource.');
    }
    const args = parseJsonObject(text);
    if (!args) return this.refuse(bmc, slot, 'PATCH', 400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    const image = args.Image;
    if (image === null || image === '' || args.Inserted === false) return this.eject(bmc, slot, 'PATCH');
    if (typeof image === 'string') return this.insert(bmc, slot, args, 'PATCH');
    if (typeof args.WriteProtected === 'boolean' && Object.keys(args).length === 1) {
      m.writeProtected = args.WriteProtected;
      m.version++;
      return { status: 204 };
    }
    return this.refuse(bmc, slot, 'PATCH', 400, 'PropertyMissing', 'The request body must set Image (and Inserted) to insert or eject.', ['#/Image']);
  }

  /**
   * What the system boots on a power on, from its override (a Once override is consumed here,
   * as real firmware does at POST): the image in a matching slot, or the disk.
   */
  bootPlan(bmc: SimBmc, sysPath: string, s: SystemState): Omit<Running, 'phase' | 'since'> {
    const b = s.boot;
    const override = b.BootSourceOverrideEnabled !== 'Disabled' && b.BootSourceOverrideTarget !== 'None';
    const requested = override ? b.BootSourceOverrideTarget : 'Hdd';
    const virtualCd = s.virtualCd === true;
    if (b.BootSourceOverrideEnabled === 'Once') {
      s.boot = { ...b, BootSourceOverrideEnabled: 'Disabled', BootSourceOverrideTarget: 'None' };
      s.virtualCd = false;
      bmc.event('boot-override', { target: 'None', enabled: 'Disabled', mode: s.boot.BootSourceOverrideMode, consumed: true });
    }
    // An iDRAC before firmware 6 boots its physical optical drive for `Cd` (empty here, so the
    // disk): only the OEM import's VCD-DVD points `Cd` at the virtual CD (Ironic's idrac boot).
    if (requested === 'Cd' && this.quirks.idrac > 0 && this.quirks.idrac < 6 && !virtualCd) return { device: 'Hdd', image: null, slot: null, requested };
    // UEFI HTTP boot fetches HttpBootUri, in UEFI mode only; without a URI it would ask DHCP, which names none here.
    if (requested === 'UefiHttp') {
      const uri = b.HttpBootUri;
      if (uri && b.BootSourceOverrideMode === 'UEFI') return { device: 'UefiHttp', image: uri, slot: null };
      return { device: 'Hdd', image: null, slot: null, requested };
    }
    const wanted = requested === 'Cd' || requested === 'UsbCd' ? ['CD', 'DVD'] : requested === 'Usb' ? ['USBStick'] : requested === 'Floppy' ? ['Floppy'] : null;
    if (!wanted) return { device: requested, image: null, slot: null };
    for (const slot of this.model.mediaSlots.values()) {
      if (slot.system !== sysPath || !slot.mediaTypes.some((t) => wanted.includes(t))) continue;
      const m = this.state(bmc, slot);
      if (m.inserted && m.image) return { device: requested, image: m.image, slot: slot.id };
    }
    // No media where the override points: firmware falls through to the disk.
    return { device: 'Hdd', image: null, slot: null, requested };
  }

  /** With the image check at boot: fetches the booted image and fails the boot when it is not there. */
  checkBoot(bmc: SimBmc, s: SystemState): void {
    const r = s.running;
    if (this.check !== 'boot' || !r || !r.image || r.phase !== 'booting') return;
    void probeImage(r.image).then((problem) => {
      if (!problem || s.running !== r) return;
      r.error = problem;
      // Still booting: the end of the boot reports the failure.
      if (r.phase !== 'up') return;
      r.phase = 'failed';
      bmc.event('boot-failed', { device: r.device, image: r.image, slot: r.slot, error: problem });
      bmc.hooks?.stopped(bmc, s, 'boot-failed');
    });
  }
}
