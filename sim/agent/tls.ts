/**
 * IPA's automatic TLS (`tls_utils.generate_tls_certificate`, IPA ≥ 7 when Ironic speaks API
 * 1.68): a self-signed certificate for the agent's own address, an EC P-256 key, SHA-256, the
 * ramdisk's host name as CN and the address as the only (critical) subject alternative name,
 * valid 30 days. Made with the `openssl` command, as a distribution's tools would.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its private key, both PEM. */
export interface AgentCertificate {
  cert: string;
  key: string;
}

/**
 * A self-signed certificate as IPA makes one for `address` (an IP address as IPA's always is;
 * a host name gets a DNS name instead).
 * @throws Error when openssl is missing or fails
 */
export async function generateAgentCertificate(address: string, commonName = os.hostname()): Promise<AgentCertificate> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'galvanic-agent-tls-'));
  try {
    const san = isIP(address) ? `IP:${address}` : `DNS:${address}`;
    // A config of its own: the distribution's would add CA extensions IPA's certificate lacks.
    await writeFile(path.join(dir, 'req.cnf'), [
      '[req]', 'distinguished_name = dn', 'x509_extensions = ext', 'prompt = no',
      '[dn]', `CN = ${commonName.replace(/[^A-Za-z0-9.-]/g, '-') || 'ironic-python-agent'}`,
      '[ext]', `subjectAltName = critical, ${san}`, '',
    ].join('\n'));
    await run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256', '-days', '30',
      '-config', path.join(dir, 'req.cnf'), '-keyout', path.join(dir, 'agent.key'), '-out', path.join(dir, 'agent.crt'),
    ]);
    const [cert, key] = await Promise.all([readFile(path.join(dir, 'agent.crt'), 'utf8'), readFile(path.join(dir, 'agent.key'), 'utf8')]);
    return { cert, key };
  } catch (err) {
    throw new Error(`Cannot make the agents' TLS certificate with openssl: ${(err as Error).message}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
