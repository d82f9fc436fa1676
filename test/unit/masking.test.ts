/**
 * Secret masking as oslo's mask_dict_password does it (keys, nested objects and lists,
 * credentials written inside strings), and the node the conductor hands the agent, as Ironic's
 * Node.as_dict(secure=True) makes it: every field, with driver_info, instance_info and
 * driver_internal_info masked and the config drive shown only to execute_deploy_step.
 */
import { expect } from 'chai';
import { MASK, maskSecrets, maskText } from '../../common/masking.js';
import { secureNode } from '../../drivers/agent/session.js';

describe('secret masking', () => {
  it('masks credential keys, in nested objects and in lists, and leaves the rest', () => {
    expect(maskSecrets({
      redfish_username: 'admin', redfish_password: 'pw', ipmi_password: '', snmp_auth_key: 'k', sys_pswd: 'x', ssh_private_key_file: '/k',
      nested: { agent_secret_token: 't', port: 623 },
      steps: [{ step: 's', args: { admin_password: 'p', name: 'n' } }, 'plain', 7],
    })).to.deep.equal({
      redfish_username: 'admin', redfish_password: MASK, ipmi_password: '', snmp_auth_key: MASK, sys_pswd: MASK, ssh_private_key_file: MASK,
      nested: { agent_secret_token: MASK, port: 623 },
      steps: [{ step: 's', args: { admin_password: MASK, name: 'n' } }, 'plain', 7],
    });
  });

  it('masks the credentials a string names, as oslo\'s mask_password does, and leaves other strings alone', () => {
    expect(maskText('https://s3.example/disk.raw?X-Amz-Credential=AK&X-Amz-Security-Token=abc&X-Amz-Signature=def'))
      .to.equal(`https://s3.example/disk.raw?X-Amz-Credential=AK&X-Amz-Security-Token=${MASK}`);
    expect(maskText('user=admin password=s3cret')).to.equal(`user=admin password=${MASK}`);
    expect(maskText('{"token": "abc", "user": "u"}')).to.equal(`{"token": "${MASK}", "user": "u"}`);
    expect(maskText("{'admin password': 'a b'}")).to.equal(`{'admin password': '${MASK}'}`);
    expect(maskText('ipmitool --password s3cret --user admin')).to.equal(`ipmitool --password ${MASK} --user admin`);
    for (const plain of ['https://images.example/disk.raw', 'console=ttyS0 ipa-debug=1', 'boot_mode:uefi,secure_boot:true', 'https://127.0.0.1:9999/x']) {
      expect(maskText(plain)).to.equal(plain);
    }
  });
});

describe('the node handed to the agent (Node.as_dict(secure=True))', () => {
  const configdrive = { meta_data: { hostname: 'h' }, user_data: '{"ignition": {"version": "3.2.0"}}' };
  const node = {
    uuid: '1be26c0b-03f2-4d2e-ae87-c02d7f33c123', name: 'n', provision_state: 'deploying', extra: { note: 'kept' },
    properties: { root_device: { name: '/dev/sda' } },
    target_raid_config: { logical_disks: [{ size_gb: 10, raid_level: '1' }] },
    driver_info: { redfish_address: 'https://bmc', redfish_username: 'admin', redfish_password: 'bmc-secret', agent_burnin_gpu_count: 2 },
    instance_info: {
      image_source: 'https://s3.example/disk.raw?X-Amz-Security-Token=url-secret', image_os_hash_algo: 'sha256',
      image_pull_secret: 'pull-secret', configdrive,
    },
    driver_internal_info: { agent_url: 'https://10.0.0.5:9999', agent_secret_token: 'agent-token', deploy_steps: [{ step: 'x', args: { password: 'step-secret' } }] },
  };

  it('masks driver_info, instance_info and driver_internal_info, and keeps every other field as it is', () => {
    const sent = secureNode(node, false);
    expect(sent.driver_info).to.deep.equal({ redfish_address: 'https://bmc', redfish_username: 'admin', redfish_password: MASK, agent_burnin_gpu_count: 2 });
    expect(sent.instance_info).to.deep.equal({
      image_source: `https://s3.example/disk.raw?X-Amz-Security-Token=${MASK}`, image_os_hash_algo: 'sha256', image_pull_secret: MASK, configdrive: MASK,
    });
    expect(sent.driver_internal_info).to.deep.equal({ agent_url: 'https://10.0.0.5:9999', agent_secret_token: MASK, deploy_steps: [{ step: 'x', args: { password: MASK } }] });
    for (const k of ['uuid', 'name', 'provision_state', 'extra', 'properties', 'target_raid_config'] as const) expect(sent[k]).to.deep.equal(node[k]);
    for (const secret of ['bmc-secret', 'url-secret', 'pull-secret', 'agent-token', 'step-secret', 'ignition']) expect(JSON.stringify(sent)).to.not.include(secret);
  });

  it('shows execute_deploy_step the config drive as it was given, a JSON dict as a dict, and nothing else unmasked', () => {
    const sent = secureNode(node, true);
    expect((sent.instance_info as Record<string, unknown>).configdrive).to.deep.equal(configdrive);
    expect(sent.driver_info).to.deep.equal(secureNode(node, false).driver_info);
    expect({ ...(sent.instance_info as object), configdrive: MASK }).to.deep.equal(secureNode(node, false).instance_info);
    // A node without one gets none.
    expect(secureNode({ ...node, instance_info: { image_source: 'x' } }, true).instance_info).to.deep.equal({ image_source: 'x' });
  });

  it('leaves the node it was given untouched', () => {
    const before = JSON.stringify(node);
    secureNode(node, false);
    secureNode(node, true);
    expect(JSON.stringify(node)).to.equal(before);
  });
});
