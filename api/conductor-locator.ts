import type { Knex } from 'knex';
import type { HashRing } from '../common/hash-ring.js';
import { liveRings } from '../db/conductors.js';

/**
 * Which conductor manages a node, for the node's `conductor` field (API 1.49): the owner of
 * the node's UUID on the hash ring of the live conductors of its group, which is the
 * conductor that claims its intents. The live set is re-read at most every `ttlMs`, so a list
 * of a thousand nodes costs one small query, not one per node.
 */
export class ConductorLocator {
  private rings = new Map<string, HashRing>();
  private readAt = 0;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly heartbeatTimeoutSeconds: number,
    private readonly ttlMs = 2000,
  ) {}

  /** Makes sure the live set is at most `ttlMs` old. */
  async refresh(): Promise<void> {
    if (Date.now() - this.readAt < this.ttlMs) return;
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    await this.reading;
  }

  /** The node's conductor, or null when its group has no live conductor. Call refresh() first. */
  conductorOf(node: { uuid: string; conductorGroup: string }): string | null {
    return this.rings.get(node.conductorGroup)?.owner(node.uuid) ?? null;
  }

  private async read(): Promise<void> {
    this.rings = await liveRings(this.db, this.heartbeatTimeoutSeconds);
    this.readAt = Date.now();
  }
}
