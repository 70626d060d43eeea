/**
 * A host started by `tandem launch` has an IPC channel to the launcher and
 * nothing else on it: when the channel closes (the launcher ended, even by
 * SIGKILL) the host aborts its run, and exits on the spot if the abort has
 * not ended it within LAUNCHER_GONE_EXIT_MS. So no host outlives its launcher.
 */
const LAUNCHER_GONE_EXIT_MS = 10_000;

export function abortWhenLauncherGoes(run: { abort(): void }, say: (line: string) => void): () => void {
  if (!process.channel) return () => {};
  const onGone = () => {
    say('tandem: the launcher is gone: aborting the run');
    run.abort();
    setTimeout(() => process.exit(1), LAUNCHER_GONE_EXIT_MS).unref();
  };
  process.on('disconnect', onGone);
  process.channel.unref(); // the channel alone never keeps the host alive
  return () => process.off('disconnect', onGone);
}
