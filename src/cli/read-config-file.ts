/** A `--config` file: JSON holding one object of train options; anything else is named with what was found. */
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { fsReason } from '../output/fs-reason.js';
import { jsonErrorPlace } from '../json-place.js';
import { readTextFileSync } from '../read-regular-file.js';

function notAnObject(file: string, found: string): never {
  throw new TandemError(
    'BAD_CONFIG',
    `--config ${file}: expected a JSON object of train options (e.g. {"model": "mlp", "devices": 2}), found ${found}`,
  );
}

export function readConfigFile(file: string): TrainConfig {
  let text: string;
  try {
    text = readTextFileSync(file);
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `--config ${file}: cannot read it: ${fsReason(err)}`, undefined, {
      cause: err,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const place = jsonErrorPlace(text, err);
    notAnObject(
      file,
      text.trim() === '' ? 'an empty file' : `invalid JSON${place ? ` at ${place}` : ''} (${(err as Error).message})`,
    );
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    notAnObject(
      file,
      parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `${typeof parsed} ${JSON.stringify(parsed)}`,
    );
  }
  return parsed as TrainConfig;
}
