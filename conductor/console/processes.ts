/**
 * What a conductor knows of console processes from the kernel: a process is named by its pid,
 * its start time (so a reused pid is never mistaken for it) and the boot it runs in; each
 * console runs under a small shell wrapper that kills its process group when the conductor's
 * end of a pipe closes, and carries a marker naming the conductor that started it.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Environment variable set on every console process: `<conductor pid>:<its start ticks>`. */
export const OWNER_ENV = 'GALVANIC_CONSOLE_OWNER';

/**
 * The wrapper: `sh -c WRAPPER galvanic-console <command> <args...>`, started as the leader of
 * a new session and process group, with stdin, stdout and stderr the console's and fd 3 a
 * pipe from the conductor that nothing ever writes to. It runs the command in its own group
 * and waits; a second shell waits for EOF on fd 3, which the kernel delivers the moment the
 * conductor dies however it dies (SIGKILL included), and then SIGKILLs the whole group. A
 * command that ignores stdin EOF or is stopped (SIGKILL ends a stopped process too) is ended
 * all the same. Node has no prctl(PR_SET_PDEATHSIG), and polling the parent would leave a
 * window and a timer per console; the pipe costs one idle shell and no timer.
 */
export const WRAPPER = [
  'exec 4<&0 0</dev/null',
  '"$@" 0<&4 4<&- 3<&- &',
  'c=$!',
  'exec 4<&-',
  '{ read -r _ <&3; kill -KILL 0; } &',
  'w=$!',
  'exec 3<&-',
  'wait "$c"; s=$?',
  'kill "$w" 2>/dev/null',
  'exit "$s"',
].join('\n');

/** argv[0] of the wrapper, as /proc shows it. */
export const WRAPPER_NAME = 'galvanic-console';

interface Stat {
  state: string;
  ppid: number;
  pgrp: number;
  startTicks: number;
}

function stat(pid: number): Stat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields counted after the ")" that ends the command name (which may hold spaces).
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), startTicks: Number(f[19]) };
  } catch {
    return null;
  }
}

/** The kernel start time of a process (clock ticks since boot), or null when it is gone. */
export function processStartTicks(pid: number): number | null {
  return stat(pid)?.startTicks ?? null;
}

/** True while the process with this pid and start time exists and is not a zombie. */
export function processAlive(pid: number, startTicks: number): boolean {
  const s = stat(pid);
  return s !== null && s.startTicks === startTicks && s.state !== 'Z';
}

/** Signals a whole process group, ignoring one that is already gone. */
export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // gone
  }
}

let cachedBootId: string | null | undefined;

/** This machine's current boot (null where the kernel does not say). */
export function bootId(): string | null {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      cachedBootId = null;
    }
  }
  return cachedBootId;
}

/** The marker value for processes this process starts. */
export function ownerMarker(): string {
  return `${process.pid}:${processStartTicks(process.pid) ?? 0}`;
}

/** A process group of console processes found in /proc, with who started it. */
export interface MarkedGroup {
  pgid: number;
  ownerPid: number;
  ownerStartTicks: number;
  pids: number[];
}

/** Every live process group carrying the console marker (those of every conductor on this machine). */
export function markedGroups(): MarkedGroup[] {
  const groups = new Map<number, MarkedGroup>();
  const prefix = `${OWNER_ENV}=`;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let env: string;
    try {
      env = readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue; // gone, or another user's
    }
    const start = env.startsWith(prefix) ? 0 : env.indexOf(`\0${prefix}`) + 1;
    if (start === 0 && !env.startsWith(prefix)) continue;
    const end = env.indexOf('\0', start);
    const m = /^(\d+):(\d+)$/.exec(env.slice(start + prefix.length, end === -1 ? undefined : end));
    const s = stat(pid);
    if (!m || !s || s.state === 'Z') continue;
    const g = groups.get(s.pgrp) ?? { pgid: s.pgrp, ownerPid: Number(m[1]), ownerStartTicks: Number(m[2]), pids: [] };
    g.pids.push(pid);
    groups.set(s.pgrp, g);
  }
  return [...groups.values()];
}
