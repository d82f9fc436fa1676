/**
 * The exporter's per-node series, served through prom-client. Each node's latest samples
 * replace its previous ones (a sensor that disappeared disappears), and a node not heard
 * from within `staleAfterMs` (deleted, moved to another group, its BMC gone) loses all of
 * its series. Families are prom-client metrics whose values are read from this store at
 * scrape time: sensors differ in their labels, which a fixed-label Gauge cannot express.
 */
import type { Registry } from 'prom-client';
import { HELP, type Labels, type Sample } from './sensor-metrics.js';

interface NodeEntry {
  seenAt: number;
  /** Metric names this node has samples of. */
  names: Set<string>;
}

/** One metric family, rendered from the store on each scrape. */
class Family {
  readonly type = 'gauge';
  readonly aggregator = 'sum';
  readonly byNode = new Map<string, Array<{ labels: Labels; value: number }>>();

  constructor(readonly name: string, readonly help: string) {}

  /** What prom-client's Registry reads of a metric to render it. */
  get(): { name: string; help: string; type: 'gauge'; aggregator: 'sum'; values: Array<{ labels: Labels; value: number }> } {
    const values: Array<{ labels: Labels; value: number }> = [];
    for (const samples of this.byNode.values()) for (const s of samples) values.push(s);
    return { name: this.name, help: this.help, type: 'gauge', aggregator: 'sum', values };
  }
}

export class NodeSeries {
  private readonly nodes = new Map<string, NodeEntry>();
  private readonly families = new Map<string, Family>();

  constructor(private readonly registry: Registry, private readonly staleAfterMs: number) {}

  /** Replaces the node's samples with these. */
  update(nodeUuid: string, samples: readonly Sample[], now = Date.now()): void {
    const entry = this.nodes.get(nodeUuid) ?? { seenAt: now, names: new Set<string>() };
    for (const name of entry.names) this.families.get(name)?.byNode.delete(nodeUuid);
    entry.names.clear();
    entry.seenAt = now;
    for (const s of samples) {
      const f = this.family(s.name);
      let list = f.byNode.get(nodeUuid);
      if (!list) {
        list = [];
        f.byNode.set(nodeUuid, list);
        entry.names.add(s.name);
      }
      list.push({ labels: s.labels, value: s.value });
    }
    this.nodes.set(nodeUuid, entry);
  }

  /** Drops the series of nodes not updated for staleAfterMs; returns how many nodes went. */
  sweep(now = Date.now()): number {
    let gone = 0;
    for (const [uuid, entry] of this.nodes) {
      if (now - entry.seenAt < this.staleAfterMs) continue;
      for (const name of entry.names) this.families.get(name)?.byNode.delete(uuid);
      this.nodes.delete(uuid);
      gone++;
    }
    return gone;
  }

  get nodeCount(): number {
    return this.nodes.size;
  }

  private family(name: string): Family {
    let f = this.families.get(name);
    if (!f) {
      f = new Family(name, HELP[name] ?? `Sensor reading ${name} (ironic-prometheus-exporter naming).`);
      this.families.set(name, f);
      // A structural metric: prom-client's Registry only calls get() (and reads name/type).
      this.registry.registerMetric(f as unknown as Parameters<Registry['registerMetric']>[0]);
    }
    return f;
  }
}
