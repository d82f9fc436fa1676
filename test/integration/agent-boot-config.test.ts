/**
 * Where a node's agent image comes from, as Ironic's redfish-virtual-media boot finds it:
 * driver_info deploy_iso, else a deploy_kernel and deploy_ramdisk from driver_info or else from
 * `[conductor] deploy_kernel` / `deploy_ramdisk`, with Ironic's validation messages for what is
 * missing or ambiguous (`[conductor] error_on_ramdisk_config_inconsistency`). A kernel and
 * ramdisk are built into the agent ISO by the conductor (agent-iso.test.ts); validation checks
 * their URLs and checksums.
 */
import { expect } from 'chai';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createNode, injector, type ApiCall } from '../helpers/provisioning.js';

const KERNEL = 'http://images.example/ipa.kernel';
const RAMDISK = 'http://images.example/ipa.initramfs';
const MISSING = "Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are:";

describe('the agent image from driver_info or [conductor] deploy_kernel / deploy_ramdisk', function () {
  this.timeout(30_000);
  const apps: TestApp[] = [];

  after(() => Promise.all(apps.map((t) => t.close())));

  async function apiWith(env: Record<string, string>): Promise<ApiCall> {
    const t = await buildTestApp(env, { conductor: false });
    apps.push(t);
    return injector(t.app);
  }

  /** The deploy interface's validation reason for a direct-deploy node with this driver_info. */
  async function deployReason(api: ApiCall, name: string, driverInfo: Record<string, unknown>): Promise<string | null> {
    const node = await createNode(api, {
      name, driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct',
      driver_info: { redfish_address: 'http://127.0.0.1:9', redfish_username: 'admin', redfish_password: 'password', ...driverInfo },
      instance_info: { image_source: 'http://images.example/disk.raw', image_checksum: 'a'.repeat(32) },
    });
    const res = await api('GET', `/v1/nodes/${node.uuid}/validate`);
    expect(res.status, res.body).to.equal(200);
    const deploy = res.json<Record<string, { result: boolean; reason?: string | null }>>().deploy;
    return deploy.result ? null : deploy.reason ?? '';
  }

  it('without any: both missing, also when driver_info names only one of them (Ironic then falls back to the config)', async () => {
    const api = await apiWith({});
    expect(await deployReason(api, 'none', {})).to.include(`${MISSING} ['deploy_kernel', 'deploy_ramdisk']`);
    expect(await deployReason(api, 'kernel-only', { deploy_kernel: KERNEL })).to.include(`${MISSING} ['deploy_kernel', 'deploy_ramdisk']`);
    expect(await deployReason(api, 'iso', { deploy_iso: 'http://images.example/ipa.iso' })).to.equal(null);
  });

  it('takes them from driver_info, else from [conductor] for nodes that name none or one, and checks their URLs and checksums', async () => {
    const api = await apiWith({ GALVANIC_CONDUCTOR__DEPLOY_KERNEL: KERNEL, GALVANIC_CONDUCTOR__DEPLOY_RAMDISK: RAMDISK });
    expect(await deployReason(api, 'conf', {})).to.equal(null);
    expect(await deployReason(api, 'conf-half', { deploy_ramdisk: RAMDISK })).to.equal(null);
    expect(await deployReason(api, 'own', { deploy_kernel: KERNEL, deploy_ramdisk: RAMDISK, deploy_ramdisk_checksum: `sha256:${'b'.repeat(64)}` })).to.equal(null);
    expect(await deployReason(api, 'own-ftp', { deploy_kernel: 'ftp://images.example/k', deploy_ramdisk: RAMDISK }))
      .to.include('driver_info deploy_kernel must be an http://, https:// or file:// URL, got "ftp://images.example/k"');
    expect(await deployReason(api, 'own-sum', { deploy_kernel: KERNEL, deploy_ramdisk: RAMDISK, deploy_kernel_checksum: 'sha1:zz' }))
      .to.include('The image checksum "sha1:zz" is not <algorithm>:<hex>');
    // The node's ISO comes first, as in Ironic.
    expect(await deployReason(api, 'conf-iso', { deploy_iso: 'http://images.example/ipa.iso' })).to.equal(null);
    const half = await apiWith({ GALVANIC_CONDUCTOR__DEPLOY_KERNEL: KERNEL });
    expect(await deployReason(half, 'conf-kernel', {})).to.include(`${MISSING} ['deploy_ramdisk']`);
  });

  it('refuses a driver_info that names only one of them with error_on_ramdisk_config_inconsistency', async () => {
    const api = await apiWith({
      GALVANIC_CONDUCTOR__DEPLOY_KERNEL: KERNEL, GALVANIC_CONDUCTOR__DEPLOY_RAMDISK: RAMDISK, GALVANIC_CONDUCTOR__ERROR_ON_RAMDISK_CONFIG_INCONSISTENCY: 'true',
    });
    const reason = await deployReason(api, 'ambiguous', { deploy_ramdisk: RAMDISK });
    expect(reason).to.match(/Node \S+ driver_info has an override for deploy_ramdisk, but not for deploy_kernel\. This configuration is ambiguous\. Node \S+ cannot boot a ramdisk\./);
  });
});
