import type { Knex } from 'knex';
import * as m0001 from './0001_initial.js';
import * as m0002 from './0002_hot_path_indexes.js';
import * as m0003 from './0003_operations.js';
import * as m0004 from './0004_console.js';
import * as m0005 from './0005_provisioning.js';
import * as m0006 from './0006_chassis_portgroups.js';
import * as m0007 from './0007_traits_allocations_templates.js';
import * as m0008 from './0008_volume_raid.js';
import * as m0009 from './0009_runbooks.js';
import * as m0010 from './0010_agent_tokens.js';
import * as m0012 from './0012_hot_intent_updates.js';
import * as m0013 from './0013_console_orphans.js';
import * as m0014 from './0014_node_ring_hash.js';
import * as m0015 from './0015_intents_due_idx.js';
import * as m0016 from './0016_bios_settings.js';
import * as m0017 from './0017_firmware_information.js';
import * as m0018 from './0018_node_service_step.js';

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
  { name: '0006_chassis_portgroups', ...m0006 },
  { name: '0007_traits_allocations_templates', ...m0007 },
  { name: '0008_volume_raid', ...m0008 },
  { name: '0009_runbooks', ...m0009 },
  { name: '0010_agent_tokens', ...m0010 },
  { name: '0012_hot_intent_updates', ...m0012 },
  { name: '0013_console_orphans', ...m0013 },
  { name: '0014_node_ring_hash', ...m0014 },
  { name: '0015_intents_due_idx', ...m0015 },
  { name: '0016_bios_settings', ...m0016 },
  { name: '0017_firmware_information', ...m0017 },
  { name: '0018_node_service_step', ...m0018 },
];
