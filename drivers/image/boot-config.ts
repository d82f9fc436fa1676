/**
 * The boot loaders' configuration files of an agent ISO: Ironic's templates for isolinux and
 * GRUB (ironic/common/isolinux_config.template, grub_conf.template), rendered with the kernel
 * command line the caller decided, and reading the kernel and initrd a given ISO's configuration
 * boots, to re-master it.
 */
import fs from 'node:fs/promises';
import { ImageCreationFailed, InvalidParameterValue } from '../../common/errors.js';

/** Ironic's isolinux_config.template. */
export const ISOLINUX_TEMPLATE = `default boot

label boot
kernel {{ kernel }}
append initrd={{ ramdisk }} text {{ kernel_params }} --
`;

/** Ironic's grub_conf.template. */
export const GRUB_TEMPLATE = `set default=0
set timeout=5
set hidden_timeout_quiet=false

menuentry "boot_partition" {
linux {{ linux }} {{ kernel_params }} --
initrd {{ initrd }}
}
`;

/**
 * x86's COMMAND_LINE_SIZE is 2048 bytes with its terminating NUL, and the boot loaders add a few
 * words of their own (isolinux `initrd=… text … --`, GRUB `BOOT_IMAGE=…`): a longer line would
 * reach the kernel cut short, silently.
 */
export const MAX_CMDLINE_BYTES = 1900;

/**
 * A kernel command line that both configurations carry to the kernel unchanged.
 * @throws InvalidParameterValue (a control character would end the line and start a new
 *   configuration statement; a quote or backslash GRUB would rewrite; too long for the kernel)
 */
export function checkCmdline(cmdline: string): void {
  // eslint-disable-next-line no-control-regex
  const control = /[\u0000-\u001f\u007f]/.exec(cmdline);
  if (control !== null) {
    throw new InvalidParameterValue(`The kernel command line contains the control character U+${control[0].charCodeAt(0).toString(16).padStart(4, '0')} at offset ${control.index}; a boot loader's configuration cannot carry it.`);
  }
  // GRUB's linux command re-quotes its arguments (a quoted word with spaces becomes "k=v w",
  // a quote inside a word becomes \"), so these would not reach the kernel as written.
  const quote = /["'\\]/.exec(cmdline);
  if (quote !== null) {
    throw new InvalidParameterValue(`The kernel command line contains ${quote[0]} at offset ${quote.index}; GRUB would pass it to the kernel rewritten, so quotes and backslashes are not accepted.`);
  }
  const bytes = Buffer.byteLength(cmdline);
  if (bytes > MAX_CMDLINE_BYTES) {
    throw new InvalidParameterValue(`The kernel command line is ${bytes} bytes long; at most ${MAX_CMDLINE_BYTES} reach the kernel whole.`);
  }
}

/**
 * GRUB reads a configuration as a shell script: `$` expands variables, `;` `&` `|` `<` `>` end
 * words, braces group, `#` starts a comment, and `*` `?` `[` `]` may be wildcards. Each is
 * escaped with a backslash so that the kernel receives the line as given (checkCmdline refused
 * quotes and backslashes). A line of ordinary parameters (`ipa-api-url=http://…`,
 * `console=ttyS0,115200n8`) is written unchanged.
 */
export function escapeForGrub(cmdline: string): string {
  return cmdline.replace(/[$;&|<>{}#`*?[\]]/g, (c) => `\\${c}`);
}

/** The variables a template may use. */
export type TemplateValues = Readonly<Record<string, string>>;

/**
 * Replaces `{{ name }}` with its value, in one pass (a value is never read as a template).
 * Ironic's templates are Jinja; these use only substitutions, and anything else is refused
 * rather than written into a boot loader's configuration as text.
 * @throws ImageCreationFailed (an unknown variable, a Jinja statement)
 */
export function renderTemplate(template: string, values: TemplateValues, source: string): string {
  if (/\{%|\{#/.test(template)) {
    throw new ImageCreationFailed('iso', `The template ${source} uses Jinja statements or comments; only {{ ${Object.keys(values).join(' }}, {{ ')} }} are replaced.`);
  }
  return template.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_m, name: string) => {
    const value = values[name];
    if (value === undefined) {
      throw new ImageCreationFailed('iso', `The template ${source} uses {{ ${name} }}; only {{ ${Object.keys(values).join(' }}, {{ ')} }} are replaced.`);
    }
    return value;
  });
}

/**
 * The template in `file`, or the built-in one.
 * @throws ImageCreationFailed (unreadable)
 */
export async function loadTemplate(file: string | undefined, builtIn: string): Promise<{ text: string; source: string }> {
  if (file === undefined) return { text: builtIn, source: 'built in' };
  try {
    return { text: await fs.readFile(file, 'utf8'), source: file };
  } catch (err) {
    throw new ImageCreationFailed('iso', `Cannot read the template ${file}: ${(err as Error).message}`);
  }
}

/** isolinux.cfg for a kernel and initrd at these paths of the ISO. */
export function renderIsolinuxConfig(template: { text: string; source: string }, kernel: string, ramdisk: string, cmdline: string): string {
  return renderTemplate(template.text, { kernel, ramdisk, kernel_params: cmdline }, template.source);
}

/** grub.cfg for a kernel and initrd at these paths of the ISO. */
export function renderGrubConfig(template: { text: string; source: string }, linux: string, initrd: string, cmdline: string): string {
  return renderTemplate(template.text, { linux, initrd, kernel_params: escapeForGrub(cmdline) }, template.source);
}

/** What a boot loader's configuration boots first. */
export interface BootEntry {
  kernel: string;
  initrd: string;
  /** GRUB's commands for them: `linuxefi`/`initrdefi` where the configuration used those. */
  linuxCommand?: string;
  initrdCommand?: string;
}

/**
 * The first entry of a syslinux/isolinux configuration that loads a kernel and an initrd:
 * `KERNEL`/`LINUX` with `initrd=` in its `APPEND`, or an `INITRD` line (keywords are
 * case-insensitive).
 */
export function firstSyslinuxEntry(text: string): BootEntry | undefined {
  let kernel: string | undefined;
  let initrd: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const [keyword = '', ...rest] = raw.trim().split(/\s+/);
    const kw = keyword.toLowerCase();
    if (kw === 'label') {
      if (kernel !== undefined && initrd !== undefined) break;
      kernel = initrd = undefined;
    } else if (kw === 'kernel' || kw === 'linux') {
      kernel = rest[0];
    } else if (kw === 'initrd') {
      initrd = rest[0]?.split(',')[0];
    } else if (kw === 'append') {
      const arg = rest.find((w) => w.startsWith('initrd='));
      if (arg !== undefined) initrd = arg.slice('initrd='.length).split(',')[0];
    }
  }
  return kernel !== undefined && initrd !== undefined ? { kernel, initrd } : undefined;
}

/**
 * The first menu entry of a GRUB configuration that loads a kernel and an initrd
 * (`linux`/`linuxefi`, `initrd`/`initrdefi`).
 */
export function firstGrubEntry(text: string): BootEntry | undefined {
  let kernel: string | undefined;
  let linuxCommand: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const [keyword = '', first] = raw.trim().split(/\s+/);
    if (/^linux(efi|16)?$/.test(keyword) && first !== undefined) {
      kernel = first;
      linuxCommand = keyword;
    } else if (/^initrd(efi|16)?$/.test(keyword) && first !== undefined && kernel !== undefined) {
      return { kernel, initrd: first, linuxCommand, initrdCommand: keyword };
    }
  }
  return undefined;
}

/**
 * A rendered GRUB configuration that loads the kernel and initrd with the commands `entry` used:
 * the GRUB of some distributions' signed images (RHEL 7's) has `linuxefi` and `initrdefi` only,
 * so a re-mastered ISO keeps them.
 */
export function withEntryCommands(config: string, entry: BootEntry): string {
  return config.replace(/^(\s*)(linux|initrd)(?=\s)/gm, (_m, indent: string, cmd: string) =>
    `${indent}${(cmd === 'linux' ? entry.linuxCommand : entry.initrdCommand) ?? cmd}`);
}
