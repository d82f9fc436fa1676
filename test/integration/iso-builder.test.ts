/**
 * The agent ISO builder against the real tools (xorriso, isolinux, GRUB, mtools, dosfstools):
 * what lands on the ISO, its El Torito catalog, re-mastering a given deploy ISO, and that a
 * failed or refused build leaves nothing behind. iso-boot.test.ts boots the result.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../../common/config.js';
import { ImageCreationFailed, ImageToolMissing, InvalidParameterValue } from '../../common/errors.js';
import { buildAgentIso, type BuildAgentIsoOptions } from '../../drivers/image/iso-builder.js';
import { isoToolPathsFromConfig, probeIsoTools } from '../../drivers/image/iso-tools.js';
import { elToritoPlatforms, extractIso, fatFileList, isoFileList, requireIsoTools, scratchDir } from '../helpers/iso.js';

const run = promisify(execFile);
const CMDLINE = 'ipa-api-url=http://192.0.2.10:6385 ipa-global-request-id=req-1234 boot_method=vmedia console=ttyS0,115200n8 nofb nomodeset';

describe('agent ISO builder', function () {
  this.timeout(60_000);
  let dir: string;
  let kernel: string;
  let ramdisk: string;
  /** Where the builder keeps its work files in these tests: empty again after every build. */
  let tempDir: string;

  before(async function () {
    await requireIsoTools(this);
  });

  beforeEach(async () => {
    dir = await scratchDir('iso-builder-test-');
    tempDir = path.join(dir, 'tmp');
    await fs.mkdir(tempDir);
    kernel = path.join(dir, 'kernel');
    ramdisk = path.join(dir, 'ramdisk.gz');
    await fs.writeFile(kernel, Buffer.concat([Buffer.from('MZ kernel-like '), randomBytes(300_000)]));
    await fs.writeFile(ramdisk, Buffer.concat([Buffer.from('070701'), randomBytes(700_000)]));
  });

  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  const build = (opts: Partial<BuildAgentIsoOptions> & { output: string }) =>
    buildAgentIso({ kernel, ramdisk, cmdline: CMDLINE, ...opts, tools: { tempDir, ...opts.tools } } as BuildAgentIsoOptions);

  /** Nothing but `expected` in the output directory, and the builder's temporary directory empty. */
  async function expectNothingLeft(expected: string[] = []): Promise<void> {
    expect((await fs.readdir(dir)).sort()).to.deep.equal(['kernel', 'ramdisk.gz', 'tmp', ...expected].sort());
    expect(await fs.readdir(tempDir)).to.deep.equal([]);
  }

  async function expectRejects<T extends Error>(p: Promise<unknown>, type: new (...args: never[]) => T): Promise<T> {
    try {
      await p;
    } catch (err) {
      expect(err, String(err)).to.be.instanceOf(type);
      return err as T;
    }
    expect.fail(`expected ${type.name}`);
  }

  it('builds one ISO that boots in BIOS and UEFI mode, carrying the command line exactly', async () => {
    const output = path.join(dir, 'boot.iso');
    await build({ output });

    const { platforms, paths } = await elToritoPlatforms(output);
    expect(platforms).to.deep.equal(['BIOS', 'UEFI']);
    expect(paths).to.deep.equal(['/isolinux/isolinux.bin', '/boot/grub/efiboot.img']);
    const files = await isoFileList(output);
    expect(files).to.include.members(['/vmlinuz', '/initrd', '/isolinux/isolinux.bin', '/isolinux/ldlinux.c32',
      '/isolinux/isolinux.cfg', '/EFI/BOOT/grub.cfg', '/boot/grub/efiboot.img']);

    const x = await extractIso(output, path.join(dir, 'x'));
    expect(await fs.readFile(path.join(x, 'vmlinuz'))).to.deep.equal(await fs.readFile(kernel));
    expect(await fs.readFile(path.join(x, 'initrd'))).to.deep.equal(await fs.readFile(ramdisk));
    expect(await fs.readFile(path.join(x, 'isolinux/ldlinux.c32'))).to.deep.equal(await fs.readFile('/usr/lib/syslinux/modules/bios/ldlinux.c32'));
    // Ironic's templates, line for line.
    expect(await fs.readFile(path.join(x, 'isolinux/isolinux.cfg'), 'utf8')).to.equal(
      `default boot\n\nlabel boot\nkernel /vmlinuz\nappend initrd=/initrd text ${CMDLINE} --\n`);
    expect(await fs.readFile(path.join(x, 'EFI/BOOT/grub.cfg'), 'utf8')).to.equal(
      'set default=0\nset timeout=5\nset hidden_timeout_quiet=false\n\n'
      + `menuentry "boot_partition" {\nlinux /vmlinuz ${CMDLINE} --\ninitrd /initrd\n}\n`);
    // UEFI firmware boots \EFI\BOOT\BOOTX64.EFI from the El Torito EFI image.
    expect(await fatFileList(path.join(x, 'boot/grub/efiboot.img'))).to.deep.equal(['/EFI/BOOT/BOOTX64.EFI']);
    // The file GRUB searches for to find this ISO among the machine's disks.
    expect(files.filter((f) => f.startsWith('/.disk/id/'))).to.have.lengthOf(1);
    await fs.rm(x, { recursive: true });
    await expectNothingLeft(['boot.iso']);
  });

  it('builds a BIOS-only and a UEFI-only ISO', async () => {
    await build({ output: path.join(dir, 'bios.iso'), bootMode: 'bios' });
    expect((await elToritoPlatforms(path.join(dir, 'bios.iso'))).platforms).to.deep.equal(['BIOS']);
    const biosFiles = await isoFileList(path.join(dir, 'bios.iso'));
    expect(biosFiles).to.include('/isolinux/isolinux.cfg');
    expect(biosFiles.filter((f) => /grub|efi/i.test(f))).to.deep.equal([]);

    await build({ output: path.join(dir, 'uefi.iso'), bootMode: 'uefi' });
    expect((await elToritoPlatforms(path.join(dir, 'uefi.iso'))).platforms).to.deep.equal(['UEFI']);
    const uefiFiles = await isoFileList(path.join(dir, 'uefi.iso'));
    expect(uefiFiles).to.include.members(['/EFI/BOOT/grub.cfg', '/boot/grub/efiboot.img']);
    expect(uefiFiles.filter((f) => f.includes('isolinux'))).to.deep.equal([]);
    await expectNothingLeft(['bios.iso', 'uefi.iso']);
  });

  it("escapes GRUB's special characters in grub.cfg only, and writes the publisher ID", async () => {
    const cmdline = 'console=ttyS0 a=$b c;d e&f g|h i<j>k {l} #m n*o?p[q]';
    const output = path.join(dir, 'boot.iso');
    await build({ output, cmdline, publisherId: 'ab9f4c2e-0000-4000-8000-000000000001' });
    const x = await extractIso(output, path.join(dir, 'x'));
    expect(await fs.readFile(path.join(x, 'isolinux/isolinux.cfg'), 'utf8')).to.contain(`append initrd=/initrd text ${cmdline} --\n`);
    expect(await fs.readFile(path.join(x, 'EFI/BOOT/grub.cfg'), 'utf8')).to.contain(
      'linux /vmlinuz console=ttyS0 a=\\$b c\\;d e\\&f g\\|h i\\<j\\>k \\{l\\} \\#m n\\*o\\?p\\[q\\] --\n');
    const { stdout } = await run('xorriso', ['-indev', output, '-pvd_info']);
    expect(stdout).to.match(/^Publisher Id\s*: ab9f4c2e-0000-4000-8000-000000000001$/im); // d-characters: upper case
  });

  it('refuses a command line the boot loaders cannot carry, writing nothing', async () => {
    const output = path.join(dir, 'boot.iso');
    for (const cmdline of ['a=1\ndefault evil', 'a=1\r', 'dyndbg="file x +p"', "a='b'", 'a=\\b', `a=${'x'.repeat(1900)}`]) {
      const err = await expectRejects(build({ output, cmdline }), InvalidParameterValue);
      expect(err.message).to.match(/kernel command line/);
    }
    await expectNothingLeft();
  });

  it('puts a given ESP image ([DEFAULT] esp_image) on the ISO as it is', async () => {
    const esp = path.join(dir, 'esp.img');
    await run('mkfs.vfat', ['-C', esp, '1024'], { env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` } });
    const output = path.join(dir, 'boot.iso');
    await build({ output, bootMode: 'uefi', tools: { espImage: esp, grubConfigPath: '/EFI/debian/grub.cfg' } });
    const x = await extractIso(output, path.join(dir, 'x'));
    expect(await fs.readFile(path.join(x, 'boot/grub/efiboot.img'))).to.deep.equal(await fs.readFile(esp));
    expect(await fs.readFile(path.join(x, 'EFI/debian/grub.cfg'), 'utf8')).to.contain(`linux /vmlinuz ${CMDLINE} --`);
    expect(await isoFileList(output)).not.to.include('/EFI/BOOT/grub.cfg');
  });

  it("renders configured templates with Ironic's variables and refuses others", async () => {
    const isolinux = path.join(dir, 'isolinux.template');
    const grub = path.join(dir, 'grub.template');
    await fs.writeFile(isolinux, 'default x\nlabel x\n  kernel {{kernel}}\n  append initrd={{ ramdisk }} {{ kernel_params }}\n');
    await fs.writeFile(grub, 'menuentry "x" {\n  linux {{ linux }} {{ kernel_params }}\n  initrd {{ initrd }}\n}\n');
    const output = path.join(dir, 'boot.iso');
    await build({ output, tools: { isolinuxConfigTemplate: isolinux, grubConfigTemplate: grub } });
    const x = await extractIso(output, path.join(dir, 'x'));
    expect(await fs.readFile(path.join(x, 'isolinux/isolinux.cfg'), 'utf8')).to.equal(`default x\nlabel x\n  kernel /vmlinuz\n  append initrd=/initrd ${CMDLINE}\n`);
    expect(await fs.readFile(path.join(x, 'EFI/BOOT/grub.cfg'), 'utf8')).to.equal(`menuentry "x" {\n  linux /vmlinuz ${CMDLINE}\n  initrd /initrd\n}\n`);

    await fs.writeFile(grub, 'linux {{ linux }} {{ root_uuid }}\n');
    const err = await expectRejects(build({ output: path.join(dir, 'other.iso'), tools: { grubConfigTemplate: grub } }), ImageCreationFailed);
    expect(err.message).to.contain('{{ root_uuid }}');
    await fs.writeFile(grub, '{% if x %}linux {{ linux }}{% endif %}\n');
    await expectRejects(build({ output: path.join(dir, 'other.iso'), tools: { grubConfigTemplate: grub } }), ImageCreationFailed);
    await fs.rm(x, { recursive: true });
    await expectNothingLeft(['boot.iso', 'isolinux.template', 'grub.template']);
  });

  describe('re-mastering a deploy ISO', () => {
    it('keeps its kernel, initrd and boot images, and rewrites its boot configurations', async () => {
      const base = path.join(dir, 'deploy.iso');
      await build({ output: base, cmdline: 'ipa-debug=1 old=1' });
      const output = path.join(dir, 'boot.iso');
      const before = await elToritoPlatforms(base);
      await buildAgentIso({ baseIso: base, cmdline: CMDLINE, output, tools: { tempDir } });

      const after = await elToritoPlatforms(output);
      expect(after.platforms).to.deep.equal(before.platforms);
      expect(after.paths).to.deep.equal(before.paths);
      expect(after.report).to.contain('boot-info-table');
      expect(await isoFileList(output)).to.deep.equal(await isoFileList(base));
      const x = await extractIso(output, path.join(dir, 'x'));
      const b = await extractIso(base, path.join(dir, 'b'));
      for (const f of ['vmlinuz', 'initrd', 'boot/grub/efiboot.img', 'isolinux/ldlinux.c32']) {
        expect(await fs.readFile(path.join(x, f)), f).to.deep.equal(await fs.readFile(path.join(b, f)));
      }
      expect(await fs.readFile(path.join(x, 'isolinux/isolinux.cfg'), 'utf8')).to.equal(
        `default boot\n\nlabel boot\nkernel /vmlinuz\nappend initrd=/initrd text ${CMDLINE} --\n`);
      const grubCfg = await fs.readFile(path.join(x, 'EFI/BOOT/grub.cfg'), 'utf8');
      expect(grubCfg).to.contain(`linux /vmlinuz ${CMDLINE} --\ninitrd /initrd\n`);
      expect(grubCfg).not.to.contain('old=1');
      await fs.rm(x, { recursive: true });
      await fs.rm(b, { recursive: true });
      await expectNothingLeft(['deploy.iso', 'boot.iso']);
    });

    it("finds another layout's kernel and initrd, and leaves a grub.cfg that boots none as it is", async () => {
      // A distribution-like layout: entries in an included file, kernel under /casper, a stub
      // grub.cfg on the ESP side that sources the menu.
      const tree = path.join(dir, 'tree');
      await fs.mkdir(path.join(tree, 'isolinux'), { recursive: true });
      await fs.mkdir(path.join(tree, 'boot/grub/x86_64-efi'), { recursive: true });
      await fs.mkdir(path.join(tree, 'casper'));
      await fs.copyFile('/usr/lib/ISOLINUX/isolinux.bin', path.join(tree, 'isolinux/isolinux.bin'));
      await fs.writeFile(path.join(tree, 'isolinux/isolinux.cfg'), 'UI menu.c32\nINCLUDE txt.cfg\nTIMEOUT 50\n');
      await fs.writeFile(path.join(tree, 'isolinux/txt.cfg'), 'LABEL live\n  MENU LABEL Live\n  KERNEL /casper/vmlinuz\n  APPEND initrd=/casper/initrd.gz boot=casper quiet ---\n');
      const stub = 'search --file --set=root /.disk/info\nset prefix=($root)/boot/grub\nsource $prefix/grub.cfg\n';
      await fs.writeFile(path.join(tree, 'boot/grub/x86_64-efi/grub.cfg'), stub);
      await fs.writeFile(path.join(tree, 'boot/grub/grub.cfg'),
        'insmod all_video\nmenuentry "Live" {\n\tlinuxefi\t/casper/vmlinuz boot=casper quiet ---\n\tinitrdefi /casper/initrd.gz\n}\nmenuentry "Safe" {\n  linux /casper/vmlinuz nomodeset\n  initrd /casper/initrd.gz\n}\n');
      await fs.copyFile(kernel, path.join(tree, 'casper/vmlinuz'));
      await fs.copyFile(ramdisk, path.join(tree, 'casper/initrd.gz'));
      const esp = path.join(dir, 'efi.img');
      await run('mkfs.vfat', ['-C', esp, '512'], { env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` } });
      await fs.copyFile(esp, path.join(tree, 'boot/grub/efi.img'));
      const base = path.join(dir, 'distro.iso');
      await run('xorriso', ['-as', 'mkisofs', '-r', '-V', 'DISTRO', '-o', base, '-b', 'isolinux/isolinux.bin', '-c', 'isolinux/boot.cat',
        '-no-emul-boot', '-boot-load-size', '4', '-boot-info-table', '-eltorito-alt-boot', '-e', 'boot/grub/efi.img', '-no-emul-boot', tree]);

      const output = path.join(dir, 'boot.iso');
      await buildAgentIso({ baseIso: base, cmdline: CMDLINE, output, tools: { tempDir } });
      const x = await extractIso(output, path.join(dir, 'x'));
      expect(await fs.readFile(path.join(x, 'isolinux/isolinux.cfg'), 'utf8')).to.equal(
        `default boot\n\nlabel boot\nkernel /casper/vmlinuz\nappend initrd=/casper/initrd.gz text ${CMDLINE} --\n`);
      // The first entry's commands are kept: some signed GRUBs know only linuxefi and initrdefi.
      expect(await fs.readFile(path.join(x, 'boot/grub/grub.cfg'), 'utf8')).to.contain(`linuxefi /casper/vmlinuz ${CMDLINE} --\ninitrdefi /casper/initrd.gz\n`);
      expect(await fs.readFile(path.join(x, 'boot/grub/x86_64-efi/grub.cfg'), 'utf8')).to.equal(stub);
      expect(await fs.readFile(path.join(x, 'isolinux/txt.cfg'), 'utf8')).to.contain('boot=casper');
      expect(await fs.readFile(path.join(x, 'casper/vmlinuz'))).to.deep.equal(await fs.readFile(kernel));
      expect((await elToritoPlatforms(output)).platforms).to.deep.equal(['BIOS', 'UEFI']);
    });

    it('refuses a deploy ISO that cannot boot the mode asked, or is no ISO, writing nothing', async () => {
      const base = path.join(dir, 'deploy.iso');
      await build({ output: base, bootMode: 'bios' });
      const output = path.join(dir, 'boot.iso');
      const err = await expectRejects(buildAgentIso({ baseIso: base, cmdline: CMDLINE, output, bootMode: 'uefi', tools: { tempDir } }), ImageCreationFailed);
      expect(err.message).to.equal(`Creating iso image failed: The deploy ISO ${base} has no UEFI boot image, so it cannot boot in uefi mode.`);
      const notIso = await expectRejects(buildAgentIso({ baseIso: kernel, cmdline: CMDLINE, output, tools: { tempDir } }), ImageCreationFailed);
      expect(notIso.message).to.equal(`Creating iso image failed: The deploy ISO ${kernel} is not an ISO 9660 image.`);
      await expectNothingLeft(['deploy.iso']);
    });

    it('refuses a kernel and ramdisk given with a deploy ISO', async () => {
      const err = await expectRejects(buildAgentIso({ baseIso: kernel, kernel, ramdisk, cmdline: CMDLINE, output: path.join(dir, 'x.iso') } as unknown as BuildAgentIsoOptions), InvalidParameterValue);
      expect(err.message).to.contain('not both');
    });
  });

  describe('injected files (Ironic inject_files)', () => {
    const networkData = JSON.stringify({ links: [], networks: [], services: [] });

    it('puts files and contents on the ISO, labelled config-2 when they carry OpenStack metadata', async () => {
      const ca = path.join(dir, 'ca.crt');
      await fs.writeFile(ca, '-----BEGIN CERTIFICATE-----\n');
      const output = path.join(dir, 'boot.iso');
      await build({ output, injectFiles: {
        'openstack/latest/network_data.json': { content: networkData },
        '/etc/ironic-python-agent/ironic.crt': { file: ca },
      } });
      const x = await extractIso(output, path.join(dir, 'x'));
      expect(await fs.readFile(path.join(x, 'openstack/latest/network_data.json'), 'utf8')).to.equal(networkData);
      expect(await fs.readFile(path.join(x, 'etc/ironic-python-agent/ironic.crt'), 'utf8')).to.equal('-----BEGIN CERTIFICATE-----\n');
      const { stdout } = await run('xorriso', ['-indev', output, '-pvd_info']);
      expect(stdout).to.match(/^Volume Id\s*: config-2$/m);

      await build({ output: path.join(dir, 'plain.iso'), injectFiles: { 'etc/agent.conf': { content: Buffer.from('[DEFAULT]\n') } } });
      expect((await run('xorriso', ['-indev', path.join(dir, 'plain.iso'), '-pvd_info'])).stdout).to.match(/^Volume Id\s*: VMEDIA_BOOT_ISO$/m);
    });

    it("refuses a path outside the ISO or onto the ISO's own files, writing nothing", async () => {
      const output = path.join(dir, 'boot.iso');
      for (const bad of ['../outside', '/', 'vmlinuz', 'isolinux/isolinux.cfg', 'EFI/BOOT/grub.cfg']) {
        await expectRejects(build({ output, injectFiles: { [bad]: { content: 'x' } } }), InvalidParameterValue);
      }
      await expectRejects(build({ output, injectFiles: { 'a/b': { file: path.join(dir, 'missing') } } }), ImageCreationFailed);
      await expectNothingLeft();
    });

    it('adds files to a re-mastered ISO, never over its own', async () => {
      const base = path.join(dir, 'deploy.iso');
      await build({ output: base });
      const output = path.join(dir, 'boot.iso');
      await buildAgentIso({ baseIso: base, cmdline: CMDLINE, output, tools: { tempDir }, injectFiles: { 'openstack/latest/network_data.json': { content: networkData } } });
      const x = await extractIso(output, path.join(dir, 'x'));
      expect(await fs.readFile(path.join(x, 'openstack/latest/network_data.json'), 'utf8')).to.equal(networkData);
      expect((await run('xorriso', ['-indev', output, '-pvd_info'])).stdout).to.match(/^Volume Id\s*: config-2$/m);
      expect((await elToritoPlatforms(output)).platforms).to.deep.equal(['BIOS', 'UEFI']);

      const err = await expectRejects(buildAgentIso({ baseIso: base, cmdline: CMDLINE, output: path.join(dir, 'other.iso'), tools: { tempDir }, injectFiles: { initrd: { content: 'x' } } }), InvalidParameterValue);
      expect(err.message).to.equal('Cannot inject initrd: the deploy ISO has a file of its own there.');
      await fs.rm(x, { recursive: true });
      await expectNothingLeft(['deploy.iso', 'boot.iso']);
    });
  });

  it("takes Ironic's [DEFAULT] options from the configuration", () => {
    const config = loadConfig({ path: fileURLToPath(new URL('../../../etc/galvanic.conf.sample', import.meta.url)), env: {
      GALVANIC_DEFAULT__ISOLINUX_BIN: '/opt/isolinux.bin', GALVANIC_DEFAULT__LDLINUX_C32: '/opt/ldlinux.c32',
      GALVANIC_DEFAULT__ESP_IMAGE: '/opt/esp.img', GALVANIC_DEFAULT__TEMPDIR: '/var/tmp/galvanic',
      GALVANIC_DEFAULT__GRUB_CONFIG_TEMPLATE: '/etc/galvanic/grub.template',
    } });
    expect(isoToolPathsFromConfig(config)).to.deep.equal({
      isolinuxBin: '/opt/isolinux.bin', ldlinuxC32: '/opt/ldlinux.c32', isolinuxConfigTemplate: undefined,
      grubConfigTemplate: '/etc/galvanic/grub.template', grubConfigPath: 'EFI/BOOT/grub.cfg', espImage: '/opt/esp.img', tempDir: '/var/tmp/galvanic',
    });
  });

  describe('failures', () => {
    it('names the missing tool, its Debian package and its option', async () => {
      const output = path.join(dir, 'boot.iso');
      const err = await expectRejects(build({ output, tools: { isolinuxBin: path.join(dir, 'no-isolinux.bin') } }), ImageToolMissing);
      expect(err.message).to.equal(`Creating iso image failed: isolinux.bin not found (looked in ${path.join(dir, 'no-isolinux.bin')}): install the Debian package isolinux or set [DEFAULT] isolinux_bin.`);

      const probe = await probeIsoTools({ xorriso: '/nonexistent/xorriso', mkfsVfat: '/nonexistent/mkfs.vfat', grubEfiDir: '/nonexistent/x86_64-efi' });
      expect(probe.missing.map((m) => m.debianPackage)).to.deep.equal(['xorriso', 'grub-efi-amd64-bin', 'dosfstools']);
      expect(probe.message).to.contain('install the Debian package xorriso').and.contain('install the Debian package grub-efi-amd64-bin');
      // A BIOS-only build needs no GRUB, and a given ESP image needs no tools to make one.
      expect((await probeIsoTools({ grubEfiDir: '/nonexistent' }, { bootMode: 'bios' })).missing).to.deep.equal([]);
      expect((await probeIsoTools({ grubEfiDir: '/nonexistent', espImage: kernel })).missing).to.deep.equal([]);
      await expectNothingLeft();
    });

    it("leaves no file when a tool fails, quoting the tool's stderr, and keeps an existing output", async () => {
      // A stand-in for xorriso that writes part of its output, then fails as a full disk would.
      const fake = path.join(dir, 'xorriso');
      await fs.writeFile(fake, '#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\nhead -c 65536 /dev/zero > "$2"\necho "libburn : FATAL : No space left on device" >&2\nexit 5\n', { mode: 0o755 });
      const output = path.join(dir, 'boot.iso');
      await fs.writeFile(output, 'the previous ISO');
      const err = await expectRejects(build({ output, tools: { xorriso: fake } }), ImageCreationFailed);
      expect(err.message).to.equal('Creating iso image failed: xorriso exited with status 5: libburn : FATAL : No space left on device');
      expect(err.toolOutput).to.equal('libburn : FATAL : No space left on device');
      expect(await fs.readFile(output, 'utf8')).to.equal('the previous ISO');
      await expectNothingLeft(['xorriso', 'boot.iso']);
    });

    it('kills a tool that runs past its timeout and leaves nothing', async () => {
      const slow = path.join(dir, 'mkfs.vfat');
      await fs.writeFile(slow, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
      const started = Date.now();
      const err = await expectRejects(build({ output: path.join(dir, 'boot.iso'), tools: { mkfsVfat: slow, timeoutMs: 300 } }), ImageCreationFailed);
      expect(err.message).to.equal('Creating ESP image failed: mkfs.vfat timed out after 0.3 s.');
      expect(Date.now() - started).to.be.below(10_000);
      await expectNothingLeft(['mkfs.vfat']);
    });

    it('stops a build when its signal aborts, leaving nothing', async () => {
      const slow = path.join(dir, 'xorriso');
      await fs.writeFile(slow, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
      const controller = new AbortController();
      const building = build({ output: path.join(dir, 'boot.iso'), tools: { xorriso: slow }, signal: controller.signal });
      setTimeout(() => controller.abort(), 300);
      const err = await expectRejects(building, ImageCreationFailed);
      expect(err.message).to.equal('Creating iso image failed: The build was stopped while xorriso ran.');
      await expectNothingLeft(['xorriso']);
    });

    it('reports a temporary directory or an output directory it cannot write to', async () => {
      const noTmp = await expectRejects(build({ output: path.join(dir, 'boot.iso'), tools: { tempDir: path.join(dir, 'no-such-dir') } }), ImageCreationFailed);
      expect(noTmp.message).to.match(/^Creating iso image failed: Cannot create a work directory in .*no-such-dir: ENOENT/);
      await expectRejects(build({ output: path.join(dir, 'no-such-dir', 'boot.iso') }), ImageCreationFailed);
      await expectNothingLeft();
    });

    it('refuses a kernel or ramdisk that is missing or not a file', async () => {
      const err = await expectRejects(build({ output: path.join(dir, 'boot.iso'), ramdisk: path.join(dir, 'nope') }), ImageCreationFailed);
      expect(err.message).to.match(/^Creating iso image failed: Cannot read .*nope: ENOENT/);
      await expectRejects(build({ output: path.join(dir, 'boot.iso'), kernel: tempDir }), ImageCreationFailed);
      await expectNothingLeft();
    });
  });
});
