/**
 * The known name a mistyped one most likely meant (`stps` -> `steps`, `bacth` -> `batch`): the nearest by edit
 * distance (insertions, deletions, substitutions and swaps of neighbours), when it is near enough to be a typo — at
 * most a third of the name's letters, and at least one — and no other is as near.
 */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  const limit = Math.max(1, Math.floor(name.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  let tie = false;
  for (const candidate of known) {
    const d = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) [best, bestDistance, tie] = [candidate, d, false];
    else if (d === bestDistance) tie = true;
  }
  return best !== undefined && !tie ? best : undefined;
}

/**
 * Options other training tools name otherwise (Keras' `batch_size`, PyTorch's `lr` spelled out, torchrun's
 * `--nproc-per-node`), by their camelCase form, with tandem's name for each.
 */
const OTHER_TOOLS_NAMES: Readonly<Record<string, string>> = {
  batchSize: 'batch',
  learningRate: 'lr',
  numEpochs: 'epochs',
  maxSteps: 'steps',
  numWorkers: 'loaderThreads',
  nprocPerNode: 'devices',
  nnodes: 'hosts',
};

/** `name` in camelCase: `checkpoint-every` and `held_out` as `checkpointEvery` and `heldOut`. */
export const camelOf = (name: string) => name.replace(/[-_]+([a-z0-9])/gi, (_, c: string) => c.toUpperCase());

/**
 * The entry of `known` (keys, or kebab-case flags) that `name` (any case or separator) names in another training
 * tool: `batch_size` → `batch`, `--num-workers` → `loader-threads`.
 */
export function otherToolsName(name: string, known: readonly string[]): string | undefined {
  const key = Object.keys(OTHER_TOOLS_NAMES).find(k => k.toLowerCase() === camelOf(name).toLowerCase());
  return key === undefined ? undefined : known.find(k => camelOf(k) === OTHER_TOOLS_NAMES[key]);
}

/** Optimal string alignment distance: Levenshtein's, with a swap of two neighbouring letters counted as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2][j - 2] + 1);
      rows[i][j] = d;
    }
  }
  return rows[a.length][b.length];
}
