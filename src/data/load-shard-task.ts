/**
 * Piscina task entry of a loader thread: names the thread, and loads a device's shard (load-shard.ts).
 */
import { nameThisThread } from '../engine/thread-name.js';

nameThisThread('loader');

export { default } from './load-shard.js';
export type { LoadShardResult, LoadShardTask } from './load-shard.js';
