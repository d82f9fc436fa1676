/**
 * Vendor behaviours of virtual media and boot that Ironic and sushy carry workarounds for,
 * selectable per fleet (`--vmedia-quirks a,b=SECONDS,…`). Shape quirks (where the slots live,
 * which actions exist, MediaTypes, the `UsbCd` target) apply to the synthetic BMC only: a
 * mockup keeps its recorded shape. The behaviour quirks apply to both.
 */

export interface VmediaQuirks {
  /** SuperMicro X11: InsertMedia with `Inserted`/`WriteProtected` is 400; `UsbCd` instead of `Cd`. */
  supermicro: boolean;
  /** HPE iLO: EjectMedia with an empty body is 400; `{}` works. */
  iloEject: boolean;
  /** InsertMedia without `TransferProtocolType` is 400 `ActionParameterMissing` on `#/TransferProtocolType`. */
  needsTransferProtocol: boolean;
  /** Lenovo style: no Actions; PATCH `{Image, Inserted, WriteProtected}` with If-Match inserts. */
  patchOnly: boolean;
  /** The CD slot's MediaTypes is only `[DVD]` (Cisco UCS). */
  dvdOnly: boolean;
  /** iDRAC style: `Systems/{id}/VirtualMedia`, none under the manager. */
  underSystems: boolean;
  /** PATCH with `BootSourceOverrideEnabled: Continuous` is 400. */
  noContinuous: boolean;
  /** Dell: a slot still shows `Inserted: true` this long (ms) after an eject; 0 = off. */
  stickyInsertedMs: number;
  /** Dell: an insert within this long (ms) of an eject is 500; 0 = off. */
  ejectInProgressMs: number;
  /** InsertMedia present, EjectMedia absent: ejecting takes a PATCH. */
  noEjectAction: boolean;
  /** sushy-tools: InsertMedia into an inserted slot replaces the image (default: 400 ResourceInUse). */
  replaceInserted: boolean;
  /**
   * Dell iDRAC, the major version of its firmware (0: not an iDRAC): the synthetic BMC is a
   * PowerEdge with the Dell OEM services (dell.ts). Before version 6 a `Cd` override boots the
   * physical optical drive; only the OEM configuration import's `VCD-DVD` boots the virtual CD.
   */
  idrac: number;
}

export const NO_QUIRKS: Readonly<VmediaQuirks> = Object.freeze({
  supermicro: false,
  iloEject: false,
  needsTransferProtocol: false,
  patchOnly: false,
  dvdOnly: false,
  underSystems: false,
  noContinuous: false,
  stickyInsertedMs: 0,
  ejectInProgressMs: 0,
  noEjectAction: false,
  replaceInserted: false,
  idrac: 0,
});

/** Seconds a timed quirk lasts when its name carries no `=SECONDS`. */
const DEFAULT_QUIRK_SECONDS = 3;

const FLAGS: Record<string, keyof VmediaQuirks> = {
  supermicro: 'supermicro',
  'ilo-eject': 'iloEject',
  'needs-transfer-protocol': 'needsTransferProtocol',
  'patch-only': 'patchOnly',
  'dvd-only': 'dvdOnly',
  'vmedia-under-systems': 'underSystems',
  'no-continuous': 'noContinuous',
  'no-eject-action': 'noEjectAction',
  'replace-inserted': 'replaceInserted',
};
const TIMED: Record<string, keyof VmediaQuirks> = {
  'sticky-inserted': 'stickyInsertedMs',
  'eject-in-progress': 'ejectInProgressMs',
};

/** An iDRAC's firmware major version when `idrac` names none (iDRAC 9 with 5.x firmware). */
const DEFAULT_IDRAC_VERSION = 5;

export const QUIRK_NAMES = [...Object.keys(FLAGS), ...Object.keys(TIMED), 'idrac'];

/**
 * Parses quirk names, each optionally `=SECONDS` for the timed ones (`idrac=MAJOR` for the iDRAC).
 * @throws Error naming an unknown quirk or a bad duration
 */
export function parseQuirks(names: readonly string[]): VmediaQuirks {
  const q: VmediaQuirks = { ...NO_QUIRKS };
  for (const raw of names) {
    const item = raw.trim();
    if (!item) continue;
    const [name, arg] = item.split('=', 2);
    if (name === 'idrac') {
      const major = arg === undefined ? DEFAULT_IDRAC_VERSION : Number(arg);
      if (!Number.isInteger(major) || major < 1) throw new Error(`quirk idrac: "${arg}" is not a firmware major version`);
      q.idrac = major;
    } else if (name in TIMED) {
      const seconds = arg === undefined ? DEFAULT_QUIRK_SECONDS : Number(arg);
      if (!Number.isFinite(seconds) || seconds < 0) throw new Error(`quirk ${name}: "${arg}" is not a number of seconds`);
      (q as unknown as Record<string, number>)[TIMED[name]] = seconds * 1000;
    } else if (name in FLAGS && arg === undefined) {
      (q as unknown as Record<string, boolean>)[FLAGS[name]] = true;
    } else {
      throw new Error(`unknown virtual media quirk "${item}" (known: ${QUIRK_NAMES.join(', ')})`);
    }
  }
  return q;
}
