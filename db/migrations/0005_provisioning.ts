import type { Knex } from 'knex';

/** Interface kinds stored per node beside power, management and console (Ironic's *_interface fields). */
const KINDS = ['bios', 'boot', 'deploy', 'firmware', 'inspect', 'network', 'raid', 'rescue', 'storage', 'vendor'] as const;

/**
 * What each hardware type gave nodes before the interfaces were stored: existing nodes keep
 * behaving as they did (fake-hardware's fakes, no-* elsewhere).
 */
const BACKFILL: Record<string, Record<(typeof KINDS)[number], string>> = {
  'fake-hardware': {
    bios: 'fake', boot: 'fake', deploy: 'fake', firmware: 'fake', inspect: 'fake', network: 'noop', raid: 'fake',
    rescue: 'fake', storage: 'noop', vendor: 'fake',
  },
  redfish: {
    bios: 'no-bios', boot: 'redfish-virtual-media', deploy: 'ramdisk', firmware: 'no-firmware', inspect: 'redfish',
    network: 'noop', raid: 'no-raid', rescue: 'no-rescue', storage: 'noop', vendor: 'no-vendor',
  },
  ipmi: {
    bios: 'no-bios', boot: 'pxe', deploy: 'ramdisk', firmware: 'no-firmware', inspect: 'no-inspect', network: 'noop',
    raid: 'no-raid', rescue: 'no-rescue', storage: 'noop', vendor: 'no-vendor',
  },
};

/**
 * Provisioning: every interface kind per node, the running deploy/clean step, the inventory
 * that inspection stores, and the fields of the provisioning API (network_data, disable_power_off).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('nodes', (t) => {
    for (const kind of KINDS) t.string(`${kind}_interface`, 255);
    t.jsonb('deploy_step').notNullable().defaultTo('{}');
    t.jsonb('clean_step').notNullable().defaultTo('{}');
    t.jsonb('network_data').notNullable().defaultTo('{}');
    t.boolean('disable_power_off').notNullable().defaultTo(false);
  });
  for (const [driver, ifaces] of Object.entries(BACKFILL)) {
    const values: Record<string, string> = {};
    for (const kind of KINDS) values[`${kind}_interface`] = ifaces[kind];
    await knex('nodes').where('driver', driver).update(values);
  }
  // One inventory per node, replaced by each inspection (Ironic's node_inventory table).
  await knex.schema.createTable('node_inventory', (t) => {
    t.integer('node_id').primary().references('nodes.id').onDelete('CASCADE');
    t.jsonb('inventory').notNullable();
    t.jsonb('plugin_data').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('node_inventory');
  await knex.schema.alterTable('nodes', (t) => {
    for (const kind of KINDS) t.dropColumn(`${kind}_interface`);
    t.dropColumn('deploy_step');
    t.dropColumn('clean_step');
    t.dropColumn('network_data');
    t.dropColumn('disable_power_off');
  });
}
