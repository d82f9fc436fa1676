/**
 * Files other programs read while Galvanic writes them (dnsmasq's host and option files, boot
 * loaders' configurations): each appears whole or not at all. A file is written under a hidden
 * name in its own directory and renamed over the real one; readers that watch a directory
 * (dnsmasq's inotify on dhcp-hostsdir) skip names that start with a dot and see the rename.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

function hiddenTwin(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
}

/** Writes `data` to `file` atomically, with `mode` (default 0644). @throws the fs error (EACCES, ENOENT, ENOSPC…) */
export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const tmp = hiddenTwin(file);
  try {
    await fs.writeFile(tmp, data, { mode, flag: 'wx' });
    // writeFile's mode is filtered by the umask; the file's readers need exactly this one.
    await fs.chmod(tmp, mode);
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/** Points the symbolic link `link` at `target`, replacing whatever was there, atomically. */
export async function symlinkAtomic(target: string, link: string): Promise<void> {
  const tmp = hiddenTwin(link);
  try {
    await fs.symlink(target, tmp);
    await fs.rename(tmp, link);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/** Removes a file or link; one already gone is no error. */
export async function removeFile(file: string): Promise<void> {
  await fs.rm(file, { force: true });
}
