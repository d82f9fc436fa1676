import { LRUCache } from 'lru-cache';
import type { Node, NodeStamp } from '../db/nodes.js';

/**
 * Nodes already rendered to JSON, per view. A detailed list page is 1,000 nodes of some
 * 2.5 KiB each; building and stringifying those objects is most of the cost of a page, and
 * between two polls of a fleet's list almost none of them have changed. An entry is keyed by
 * the node's stamp (id, version, reservation), so a changed node is simply a miss: nothing
 * has to be invalidated, and a stale entry ages out of the LRU.
 */
export class RenderedNodes {
  private readonly cache: LRUCache<string, Buffer> | undefined;

  /** `maxBytes` 0 turns the cache off: every node is rendered on every request. */
  constructor(maxBytes: number) {
    this.cache = maxBytes > 0
      ? new LRUCache<string, Buffer>({ maxSize: maxBytes, sizeCalculation: (b) => b.length + 64 })
      : undefined;
  }

  private static key(stamp: NodeStamp, view: string): string {
    return `${stamp.id}:${stamp.version}:${stamp.reservation ?? ''}|${view}`;
  }

  get(stamp: NodeStamp, view: string): Buffer | undefined {
    return this.cache?.get(RenderedNodes.key(stamp, view));
  }

  /** Renders the node, keeps the result under the node's own stamp and returns it. */
  render(node: Node, view: string, toJson: (node: Node) => unknown): Buffer {
    const out = Buffer.from(JSON.stringify(toJson(node)));
    this.cache?.set(RenderedNodes.key(node, view), out);
    return out;
  }
}
