/**
 * The sweep of a conductor's HTTP root: what a node's boot published is withdrawn when the boot
 * is torn down, but a conductor that died (or lost the node to another) leaves its files. A
 * file goes when its node is gone or rests in a state that boots nothing from this root
 * (enroll, manageable, available, or a failure after which the boot was torn down); files of
 * nodes in any other state stay, whichever conductor now owns the node, since the BMC may boot
 * them again (an agent's reboot). A config drive is the instance's, not a boot's: it stays
 * until the instance is torn down (instance_info, which holds its URL, survives a failed deploy,
 * and a deploy again uses it). Half-written temporaries of a dead publish go too.
 */
import type { Logger } from 'pino';
import type { Knex } from 'knex';
import { ProvisionState as S } from '../../common/states.js';
import { provisionStatesByUuid } from '../../db/nodes.js';
import type { HttpRoot } from '../../drivers/http-root.js';
import { CONFIGDRIVE_FILE } from '../../drivers/image/configdrive.js';
import type { PeriodicTask } from '../periodic.js';

/** States in which a node boots nothing from the HTTP root. */
const RESTING: ReadonlySet<string> = new Set([
  S.ENROLL, S.VERIFYING, S.MANAGEABLE, S.AVAILABLE,
  S.INSPECTFAIL, S.CLEANFAIL, S.DEPLOYFAIL, S.ERROR, S.SERVICEFAIL, S.ADOPTFAIL, S.RESCUEFAIL, S.UNRESCUEFAIL,
]);

/** States in which a node has no instance, whose config drive could be used again. */
const NO_INSTANCE: ReadonlySet<string> = new Set([S.ENROLL, S.VERIFYING, S.MANAGEABLE, S.AVAILABLE]);

/** A file younger than this is left alone: its node may have left a resting state since it was read. */
const GRACE_MS = 60_000;
/** A publish is done long before this: a temporary this old was left by a process that died. */
const TEMPORARY_MS = 3_600_000;

export interface HttpRootSweepDeps {
  db: Knex;
  httpRoot: HttpRoot;
  log: Logger;
  spacingSeconds: number;
}

/** One sweep; what it removed. Exported for tests. */
export async function sweepHttpRoot(deps: Pick<HttpRootSweepDeps, 'db' | 'httpRoot' | 'log'>, now = Date.now()): Promise<{ files: number; removed: number }> {
  const files = await deps.httpRoot.list();
  const states = await provisionStatesByUuid(deps.db, [...new Set(files.map((f) => f.nodeUuid))]);
  let removed = 0;
  for (const file of files) {
    const state = states.get(file.nodeUuid);
    const idle = file.name === CONFIGDRIVE_FILE ? NO_INSTANCE : RESTING;
    if (state !== undefined && !idle.has(state)) continue;
    // A file published again since it was listed (a new boot) is not the one judged: removeFile leaves it.
    if (file.changedMs > now - GRACE_MS || !(await deps.httpRoot.removeFile(file))) continue;
    removed++;
    deps.log.info({ node: file.nodeUuid, file: file.path, state: state ?? 'deleted' }, 'HTTP root file of a node that boots nothing from it removed');
  }
  for (const tmp of await deps.httpRoot.temporaries()) {
    if (tmp.changedMs > now - TEMPORARY_MS || !(await deps.httpRoot.removeFile(tmp))) continue;
    removed++;
    deps.log.info({ file: tmp.path }, 'HTTP root temporary file left by an interrupted publish removed');
  }
  return { files: files.length, removed };
}

export function httpRootSweepTask(deps: HttpRootSweepDeps): PeriodicTask {
  return {
    name: 'sweep_http_root',
    spacingSeconds: deps.spacingSeconds,
    // A conductor that restarts finds what it left before it died.
    runAtStart: true,
    async run() {
      const { files } = await sweepHttpRoot(deps);
      return { nodes: files };
    },
  };
}
