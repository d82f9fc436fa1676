import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as catalogue from '../common/errors.js';
import { DatabaseUnavailable, GalvanicError } from '../common/errors.js';
import { isDatabaseUnavailable } from '../db/transaction.js';
import type { RouteMethods } from './routing.js';

/**
 * Ironic's error body: the message is a JSON string inside `error_message`
 * (python-ironicclient json.loads it and shows `faultstring`).
 */
export function errorBody(status: number, message: string): { error_message: string } {
  return {
    error_message: JSON.stringify({ faultcode: status < 500 ? 'Client' : 'Server', faultstring: message, debuginfo: null }),
  };
}

/**
 * Seconds a client is asked to wait after a 503 for an unreachable database: a restart takes
 * about a second, and python-ironicclient retries five times, two seconds apart.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 2;

/**
 * The status of each code of the error catalogue (common/errors.ts), for failures recorded by
 * their code alone (a failed intent's result): the class a code names decides its status here
 * as it does for a thrown error. Statuses are fields of the instances, so each class is built
 * once, with a placeholder argument; one whose constructor wants more (ConfigError takes a
 * list, and never reaches a client) is left out, and its code answers 500.
 */
const STATUS_OF_CODE: ReadonlyMap<string, number> = (() => {
  const statuses = new Map<string, number>();
  for (const value of Object.values(catalogue)) {
    if (typeof value !== 'function' || !(value.prototype instanceof GalvanicError)) continue;
    let probe: GalvanicError;
    try {
      probe = new (value as new (arg: string) => GalvanicError)('');
    } catch {
      continue;
    }
    // Abstract families have no code.
    if (typeof probe.code === 'string') statuses.set(probe.code, probe.httpStatus);
  }
  return statuses;
})();

/** The HTTP status of an error known by its code only; 500 for a code this version does not know. */
export function statusOfCode(code: string): number {
  return STATUS_OF_CODE.get(code) ?? 500;
}

/** Fastify's own errors that carry a client status, with messages worth showing. */
function fastifyClientError(err: FastifyError): { status: number; message: string } | undefined {
  const status = err.statusCode;
  if (status === undefined || status < 400 || status >= 500) return undefined;
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, message: 'Request body is too large.' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, message: `Unsupported Content-Type; use application/json.` };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, message: 'The request body is empty; a JSON document is required.' };
    default:
      if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
        return { status: 400, message: `The request body is not valid JSON: ${err.message}` };
      }
      return { status, message: err.message };
  }
}

/** The one place where errors become HTTP responses. */
export function installErrorHandler(app: FastifyInstance, routes: RouteMethods): void {
  app.setErrorHandler((thrown: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    let err: FastifyError | GalvanicError = thrown;
    if (isDatabaseUnavailable(thrown)) {
      // Logged without its stack: an outage would otherwise write one per request.
      req.log.warn({ err: thrown.message }, 'request failed: the database is unavailable');
      err = new DatabaseUnavailable('The service is temporarily unavailable: its database cannot be reached. Try again shortly.', DATABASE_RETRY_AFTER_SECONDS);
    }
    if (err instanceof DatabaseUnavailable) {
      reply.header('Retry-After', String(err.retryAfterSeconds));
      return reply.code(err.httpStatus).send(errorBody(err.httpStatus, err.message));
    }
    if (err instanceof GalvanicError) {
      if (err.httpStatus >= 500) req.log.error({ err }, 'request failed');
      else req.log.info({ code: err.code, reason: err.message }, 'request refused');
      if (err.httpStatus === 401) reply.header('WWW-Authenticate', 'Basic realm="Baremetal API"');
      return reply.code(err.httpStatus).send(errorBody(err.httpStatus, err.message));
    }
    const client = fastifyClientError(err);
    if (client) {
      req.log.info({ code: err.code, reason: client.message }, 'request refused');
      return reply.code(client.status).send(errorBody(client.status, client.message));
    }
    req.log.error({ err }, 'internal error');
    return reply.code(500).send(errorBody(500, 'Internal Server Error'));
  });
  app.setNotFoundHandler((req, reply) => {
    // The path exists under other methods (OPTIONS included): 405 with what it allows, as pecan answers.
    const allowed = routes.allowed(req.url.split('?')[0]);
    if (allowed.length > 0) {
      reply.header('Allow', allowed.join(', '));
      return reply.code(405).send(errorBody(405, `The method ${req.method} is not allowed for this resource.`));
    }
    return reply.code(404).send(errorBody(404, `The resource could not be found.`));
  });
}
