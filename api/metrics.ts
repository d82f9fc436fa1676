/**
 * The API's own /metrics: requests by route template, method and status with their
 * durations, the intent queue depth, and Node's default process metrics (event-loop lag,
 * memory, CPU). Route templates, not URLs, label the series, so node UUIDs cannot multiply them.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Knex } from 'knex';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { pingDatabase } from '../db/connection.js';
import { countOpenIntents } from '../db/intents.js';
import { collectProcessMetrics } from '../common/metrics-server.js';

/** How long a readiness probe waits for the database. */
export const READINESS_TIMEOUT_MS = 1000;

export interface ApiMetrics {
  registry: Registry;
  /** Counts one answered request; call it from onResponse. */
  observe(req: FastifyRequest, reply: FastifyReply): void;
}

export function buildApiMetrics(db: Knex): ApiMetrics {
  const registry = new Registry();
  collectProcessMetrics(registry);
  const labelNames = ['route', 'method', 'status'];
  const requests = new Counter({ name: 'galvanic_api_requests_total', help: 'API requests answered, by route template, method and status.', labelNames, registers: [registry] });
  const duration = new Histogram({
    name: 'galvanic_api_request_duration_seconds', help: 'Time from request to response, by route template and method.',
    labelNames: ['route', 'method'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [registry],
  });
  new Gauge({
    name: 'galvanic_database_up', help: 'Whether the database answered this scrape (1) or not (0): the readiness of this API server.', registers: [registry],
    async collect() {
      this.set((await pingDatabase(db, READINESS_TIMEOUT_MS)) ? 1 : 0);
    },
  });
  new Gauge({
    name: 'galvanic_intents_open', help: 'Intents queued or running, over all nodes.', labelNames: ['state'], registers: [registry],
    async collect() {
      // While the database is away the rest of /metrics (galvanic_database_up 0 among it) still answers.
      const n = await countOpenIntents(db).catch(() => undefined);
      if (!n) return;
      this.set({ state: 'queued' }, n.queued);
      this.set({ state: 'running' }, n.running);
    },
  });
  return {
    registry,
    observe(req, reply) {
      const route = req.routeOptions.url ?? '(unmatched)';
      requests.inc({ route, method: req.method, status: String(reply.statusCode) });
      duration.observe({ route, method: req.method }, reply.elapsedTime / 1000);
    },
  };
}
