/**
 * Whether this host's KVM boots a Linux kernel. Some hosts' nested KVM runs firmware (SeaBIOS
 * prints its banner) and then hangs in the kernel's early boot, so /dev/kvm being there says
 * little: the probe boots the kernel with no root filesystem and waits for it to get as far as
 * looking for one. The answer is kept per process and kernel.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';

export interface KvmProbe {
  kvm: boolean;
  /** Why not, or how long the kernel took to come up. */
  detail: string;
}

/** Lines a kernel prints once it has booted far enough to mount its root filesystem. */
const BOOTED = /VFS: Unable to mount root|Kernel panic|Run \/init|Freeing unused kernel/;
const probes = new Map<string, Promise<KvmProbe>>();

async function probe(kernel: string, qemu: string, timeoutMs: number): Promise<KvmProbe> {
  try {
    await fs.promises.access('/dev/kvm', fs.constants.R_OK | fs.constants.W_OK);
  } catch {
    return { kvm: false, detail: '/dev/kvm is not there or not usable' };
  }
  const started = Date.now();
  const args = ['-machine', 'pc,accel=kvm', '-cpu', 'host', '-m', '128', '-nodefaults', '-no-user-config', '-nographic', '-serial', 'stdio', '-no-reboot', '-kernel', kernel, '-append', 'console=ttyS0 panic=-1'];
  return new Promise<KvmProbe>((resolve) => {
    const child = spawn(qemu, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let done = false;
    const finish = (r: KvmProbe) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      resolve(r);
    };
    const timer = setTimeout(() => finish({ kvm: false, detail: `the kernel did not boot under KVM within ${timeoutMs / 1000} s` }), timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out = (out + chunk).slice(-4096);
      if (BOOTED.test(out)) finish({ kvm: true, detail: `the kernel booted under KVM in ${Date.now() - started} ms` });
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-2048)));
    child.once('error', (e) => finish({ kvm: false, detail: `${qemu}: ${e.message}` }));
    child.once('close', (code) => finish({ kvm: false, detail: `QEMU exited (code ${code}) before the kernel booted: ${err.trim()}` }));
  });
}

/** Boots `kernel` under KVM once per process; the answer says whether to use KVM or TCG. */
export function probeKvm(kernel: string, opts: { qemu?: string; timeoutMs?: number } = {}): Promise<KvmProbe> {
  let p = probes.get(kernel);
  if (!p) {
    p = probe(kernel, opts.qemu ?? 'qemu-system-x86_64', opts.timeoutMs ?? 15_000);
    probes.set(kernel, p);
  }
  return p;
}
