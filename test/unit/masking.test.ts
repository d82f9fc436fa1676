/**
 * Secret masking as oslo's mask_dict_password does it: keys, nested objects and lists,
 * credentials written inside strings.
 */
import { expect } from 'chai';
import { MASK, maskSecrets, maskText } from '../../common/masking.js';

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
