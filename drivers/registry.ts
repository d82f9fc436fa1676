import { ConfigError, InterfaceNotFoundInEntrypoint, DriverNotFoundInEntrypoint } from '../common/errors.js';
import { BmcBudget } from './bmc-budget.js';
import type { HardwareType, InterfaceImplementations, InterfaceKind } from './interfaces.js';
import { INTERFACE_KINDS } from './interfaces.js';

/** The part of the config the registry reads. */
export interface RegistryOptions {
  enabledHardwareTypes: readonly string[];
  enabled: Record<InterfaceKind, readonly string[]>;
  defaults: Record<InterfaceKind, string>;
}

/** The interfaces a node resolves to. */
export type ResolvedInterfaces = Record<InterfaceKind, string>;

/**
 * Which hardware types and interfaces this deployment enables, and how a node's interfaces
 * resolve (Ironic's rules: an explicit value must be enabled and supported by the hardware
 * type; otherwise the configured default when the type supports it, else the type's first
 * supported and enabled interface).
 */
export class DriverRegistry {
  private readonly types = new Map<string, HardwareType>();
  private readonly closers: Array<() => Promise<void>> = [];

  constructor(
    known: readonly HardwareType[],
    readonly implementations: InterfaceImplementations,
    private readonly opts: RegistryOptions,
    /** The per-BMC budget the drivers of this registry share (one per process, hence per conductor). */
    readonly budget: BmcBudget = new BmcBudget(4),
  ) {
    // Which names exist is the drivers' to know, so these checks are here and not in the config
    // schema (which checks, among others, that each default interface is enabled).
    const problems: string[] = [];
    const byName = new Map(known.map((t) => [t.name, t]));
    for (const name of opts.enabledHardwareTypes) {
      const t = byName.get(name);
      if (!t) problems.push(`[DEFAULT] enabled_hardware_types: unknown hardware type "${name}" (known: ${[...byName.keys()].join(', ')})`);
      else this.types.set(name, t);
    }
    for (const kind of INTERFACE_KINDS) {
      for (const iface of opts.enabled[kind]) {
        if (!Object.hasOwn(implementations[kind], iface)) {
          problems.push(`[DEFAULT] enabled_${kind}_interfaces: unknown ${kind} interface "${iface}" (known: ${Object.keys(implementations[kind]).join(', ')})`);
        }
      }
    }
    if (problems.length) throw new ConfigError(problems);
  }

  /** Registers a release step of a driver's shared resources (pools, sessions, workers). */
  onClose(close: () => Promise<void>): void {
    this.closers.push(close);
  }

  async close(): Promise<void> {
    for (const close of this.closers.splice(0).reverse()) await close();
  }

  hardwareTypes(): HardwareType[] {
    return [...this.types.values()];
  }

  hardwareType(name: string): HardwareType {
    const t = this.types.get(name);
    if (!t) {
      throw new DriverNotFoundInEntrypoint(`Could not find the following interface in the 'ironic.hardware.types' entrypoint: ${name}. Valid interfaces are ${[...this.types.keys()].join(', ')}.`);
    }
    return t;
  }

  /** The `kind` interfaces a node of `driver` may use: supported by the type and enabled, in the type's order. */
  enabledInterfaces(driver: string, kind: InterfaceKind): string[] {
    return this.hardwareType(driver).supported[kind].filter((i) => this.opts.enabled[kind].includes(i));
  }

  /** The `kind` interface a node of `driver` gets when it names none; null when none is enabled. */
  defaultInterface(driver: string, kind: InterfaceKind): string | null {
    const enabledHere = this.enabledInterfaces(driver, kind);
    const def = this.opts.defaults[kind];
    return (def && enabledHere.includes(def) ? def : enabledHere[0]) ?? null;
  }

  /** Resolves and validates a node's interfaces; `requested` holds explicit values (null = default). */
  resolve(driver: string, requested: Partial<Record<InterfaceKind, string | null>>): ResolvedInterfaces {
    const hw = this.hardwareType(driver);
    const out = {} as ResolvedInterfaces;
    for (const kind of INTERFACE_KINDS) {
      const enabledHere = this.enabledInterfaces(driver, kind);
      // Why nothing fits, when nothing does: what the type supports against what the config enables.
      const why = `hardware type "${driver}" supports ${hw.supported[kind].join(', ')}; [DEFAULT] enabled_${kind}_interfaces is ${this.opts.enabled[kind].join(', ') || 'empty'}`;
      const want = requested[kind];
      if (want !== undefined && want !== null) {
        if (!enabledHere.includes(want)) {
          throw new InterfaceNotFoundInEntrypoint(
            `Could not find a suitable ${kind} interface "${want}" for hardware type "${driver}": enabled ${kind} interfaces supported by it are ${enabledHere.join(', ') || `none (${why})`}.`,
          );
        }
        out[kind] = want;
        continue;
      }
      const chosen = this.defaultInterface(driver, kind);
      if (!chosen) {
        throw new InterfaceNotFoundInEntrypoint(`No default ${kind} interface found for hardware type "${driver}": none of its ${kind} interfaces is enabled (${why}).`);
      }
      out[kind] = chosen;
    }
    return out;
  }

  /** The implementation of `kind` named `name`, or undefined when it is not enabled here. */
  impl<K extends InterfaceKind>(kind: K, name: string | null | undefined): InterfaceImplementations[K][string] | undefined {
    if (!name || !this.opts.enabled[kind].includes(name) || !Object.hasOwn(this.implementations[kind], name)) return undefined;
    return this.implementations[kind][name] as InterfaceImplementations[K][string] | undefined;
  }

  power(name: string) {
    return this.implementations.power[name];
  }

  management(name: string) {
    return this.implementations.management[name];
  }

  console(name: string) {
    return this.implementations.console[name];
  }
}
