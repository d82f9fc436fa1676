/**
 * Cleanup for benchmarks: every resource a benchmark acquires registers how to release it;
 * the steps run in reverse order at the end, also on failure and on SIGINT/SIGTERM.
 */

export interface CleanupStep {
  name: string;
  run: () => Promise<void>;
}

const steps: CleanupStep[] = [];
let cleaning: Promise<void> | undefined;

/** Registers a release step; returns a function that runs (and unregisters) it early. */
export function onCleanup(name: string, run: () => Promise<void>): () => Promise<void> {
  const step: CleanupStep = { name, run };
  steps.push(step);
  return async () => {
    const i = steps.indexOf(step);
    if (i < 0) return;
    steps.splice(i, 1);
    await runStep(step);
  };
}

async function runStep(step: CleanupStep): Promise<void> {
  try {
    await step.run();
  } catch (err) {
    process.stderr.write(`bench: cleanup step "${step.name}" failed: ${(err as Error).message}\n`);
  }
}

/** Runs every registered step, newest first; concurrent calls share one run. */
export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    while (steps.length) await runStep(steps.pop()!);
  })();
  return cleaning;
}

/**
 * Runs a benchmark's main function: cleans up afterwards whatever happens, and on the first
 * SIGINT/SIGTERM; exits with main's code (1 on an exception, 130 on a signal).
 */
export function runBenchmark(main: () => Promise<number>): void {
  let interrupted = false;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      if (interrupted) return;
      interrupted = true;
      process.stderr.write(`bench: ${sig}, stopping what was started\n`);
      void cleanupAll().then(() => process.exit(130));
    });
  }
  main().then(
    async (code) => {
      await cleanupAll();
      process.exit(code);
    },
    async (err: unknown) => {
      process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
      await cleanupAll();
      process.exit(1);
    },
  );
}
