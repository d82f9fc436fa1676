/**
 * Redfish sessions shared by every call to a BMC, keyed by (address, user, TLS verification,
 * password hash). One entry per key doubles as the key's lock: while a login is in flight its
 * promise sits in the entry and every other caller awaits it, so concurrent callers never open
 * two sessions to one BMC. The cache is an LRU: the least recently used session is logged out
 * when a new one needs room. Compare Ironic's `SessionCache` (a class-level dict, no lock).
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';

/** What the cache needs of a session; the client adds where to send the logout. */
export interface SessionLike {
  token: string;
}

interface Entry<S> {
  session?: S;
  pending?: Promise<S>;
}

/** Awaits `p`, but rejects as soon as `signal` aborts (with `abortError()`, else the signal's reason). */
export function raceSignal<T>(p: Promise<T>, signal?: AbortSignal, abortError?: () => unknown): Promise<T> {
  if (!signal) return p;
  const reason = () => (abortError ? abortError() : signal.reason);
  if (signal.aborted) return Promise.reject(reason());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(reason());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

export class SessionCache<S extends SessionLike> {
  private readonly lru: LRUCache<string, Entry<S>>;
  private readonly logouts = new Set<Promise<void>>();

  constructor(
    max: number,
    private readonly logout: (session: S) => Promise<void>,
    private readonly log: Logger,
  ) {
    this.lru = new LRUCache<string, Entry<S>>({
      max,
      dispose: (entry, _key, reason) => {
        // Only an eviction logs out: 'delete' is an expired session or close(), which logs out itself.
        if (reason === 'evict' && entry.session) this.track(entry.session);
      },
    });
  }

  get size(): number {
    return this.lru.size;
  }

  /**
   * The session of `key`, logging in with `login` when there is none. Concurrent callers share
   * one login; each waits at most until its own `signal` aborts.
   */
  async get(key: string, login: () => Promise<S>, signal?: AbortSignal, abortError?: () => unknown): Promise<S> {
    const found = this.lru.get(key);
    if (found?.session) return found.session;
    if (found?.pending) return raceSignal(found.pending, signal, abortError);
    const entry: Entry<S> = {};
    entry.pending = login().then(
      (session) => {
        entry.pending = undefined;
        if (this.lru.peek(key) === entry) entry.session = session;
        // Evicted or invalidated while logging in: do not leave the session open on the BMC.
        else this.track(session);
        return session;
      },
      (err: unknown) => {
        entry.pending = undefined;
        if (this.lru.peek(key) === entry) this.lru.delete(key);
        throw err;
      },
    );
    this.lru.set(key, entry);
    return raceSignal(entry.pending, signal, abortError);
  }

  /** Forgets the session of `key` if its token is still `token` (the BMC answered 401 to it). */
  invalidate(key: string, token: string): void {
    const entry = this.lru.peek(key);
    if (entry?.session?.token === token) this.lru.delete(key);
  }

  private track(session: S): void {
    const p = this.logout(session).catch((err: unknown) => {
      this.log.debug({ err }, 'Redfish logout failed');
    });
    this.logouts.add(p);
    void p.finally(() => this.logouts.delete(p));
  }

  /** Logs out every cached session and waits for the logouts (each bounded by `logout`). */
  async close(): Promise<void> {
    const sessions: S[] = [];
    for (const entry of this.lru.values()) if (entry.session) sessions.push(entry.session);
    this.lru.clear();
    for (const s of sessions) this.track(s);
    await Promise.all([...this.logouts]);
  }
}
