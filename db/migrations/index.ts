import type { Knex } from 'knex';
import * as m0001 from './0001_initial.js';
import * as m0002 from './0002_hot_path_indexes.js';
import * as m0003 from './0003_operations.js';
import * as m0004 from './0004_console.js';
import * as m0005 from './0005_provisioning.js';

export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/**
 * Every migration, oldest first. Listed explicitly rather than found by scanning a directory
 * so that the compiled layout (dist/, bundling, source maps) cannot change what runs.
 * Append new migrations at the end; never rename or reorder a shipped one.
 */
export const migrations: Migration[] = [
  { name: '0001_initial', ...m0001 },
  { name: '0002_hot_path_indexes', ...m0002 },
  { name: '0003_operations', ...m0003 },
  { name: '0004_console', ...m0004 },
  { name: '0005_provisioning', ...m0005 },
];
