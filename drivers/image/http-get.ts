/**
 * GET and HEAD of images over Node's own http/https clients, redirects followed.
 *
 * Not undici: undici 7's HTTP/1 client throws an AssertionError from the socket's 'end' handler,
 * which no caller can catch, so the process dies, when a server closes the connection right
 * after the body while the body is under backpressure (nodejs/undici#5360; fixed in undici 8,
 * which needs Node 22). An image download to disk is under backpressure all along, and
 * servers that close after the body are common among image servers: HTTP/1.0 ones such as
 * `python3 -m http.server`, or any that answer `Connection: close`.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';

export interface HttpGetOptions {
  /** How long the server may stay silent: before the headers, and between two pieces of the body. */
  idleTimeoutMs: number;
  maxRedirections?: number;
}

export interface HttpGetResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The body; read it whole or destroy it. An idle server or a short body makes it fail. */
  body: IncomingMessage;
}

export class HttpGetter {
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent = new https.Agent({ keepAlive: true });

  /**
   * The response to `method url` once its headers are in, after following up to
   * `maxRedirections` (5) redirects. Rejects with the transport's error (refused, reset, idle).
   */
  async request(url: string, method: 'GET' | 'HEAD', opts: HttpGetOptions): Promise<HttpGetResponse> {
    let target = new URL(url);
    for (let left = opts.maxRedirections ?? 5; ; left--) {
      const res = await this.once(target, method, opts.idleTimeoutMs);
      const location = res.headers.location;
      if (res.statusCode >= 300 && res.statusCode < 400 && location && left > 0) {
        res.resume();
        target = new URL(location, target);
        continue;
      }
      return { statusCode: res.statusCode, headers: res.headers, body: res };
    }
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private once(target: URL, method: string, idleTimeoutMs: number): Promise<IncomingMessage & { statusCode: number }> {
    const secure = target.protocol === 'https:';
    if (!secure && target.protocol !== 'http:') return Promise.reject(new Error(`unsupported URL scheme ${target.protocol}`));
    return new Promise((resolve, reject) => {
      const req = (secure ? https : http).request(target, { method, agent: secure ? this.httpsAgent : this.httpAgent });
      // The socket's idle timeout covers the wait for the headers and every gap in the body.
      req.setTimeout(idleTimeoutMs, () => req.destroy(new Error(`no answer from ${target.host} for ${idleTimeoutMs} ms`)));
      // Every error, not only the first: one after the answer (a reset in the body) is the body's to report.
      req.on('error', reject);
      req.once('response', (res) => resolve(res as IncomingMessage & { statusCode: number }));
      req.end();
    });
  }
}
