/**
 * Malformed requests: each must get a 4xx with Ironic's error body and change nothing in the
 * database. One table, one test; the database is compared with a snapshot after every request.
 */
import { MAX_VERSION_STRING } from '../../api/versioning.js';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { buildTestApp, faultOf, type TestApp } from '../helpers/app.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

interface BadRequest {
  name: string;
  method: Method;
  /** `{node}`, `{port}`, `{nodeUuid}`, `{chassis}`, `{portgroup}`, `{pgUuid}`, `{connector}` and `{target}` are replaced with the seeded resources. */
  url: string;
  /** An object or array is sent as JSON; a string is sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  /** A part of the faultstring, where the message matters. */
  message?: string;
}

const JSON_TYPE = { 'content-type': 'application/json' };
const MISSING_UUID = '1d2c3b4a-0000-4000-8000-00000000beef';
const replaceName = (value: unknown): unknown[] => [{ op: 'replace', path: '/name', value }];

const CASES: BadRequest[] = [
  // Bodies that are not a node at all.
  { name: 'invalid JSON', method: 'POST', url: '/v1/nodes', body: '{"driver": "fake-hardware",', headers: JSON_TYPE, status: 400 },
  { name: 'a JSON array for a node', method: 'POST', url: '/v1/nodes', body: [{ driver: 'fake-hardware' }], status: 400 },
  { name: 'a JSON string for a node', method: 'POST', url: '/v1/nodes', body: '"fake-hardware"', headers: JSON_TYPE, status: 400 },
  { name: 'JSON null for a node', method: 'POST', url: '/v1/nodes', body: 'null', headers: JSON_TYPE, status: 400 },
  { name: 'Content-Type text/plain', method: 'POST', url: '/v1/nodes', body: '{"driver": "fake-hardware"}', headers: { 'content-type': 'text/plain' }, status: 415 },
  { name: 'a form-encoded body', method: 'POST', url: '/v1/nodes', body: 'driver=fake-hardware', headers: { 'content-type': 'application/x-www-form-urlencoded' }, status: 415 },
  { name: 'a body above [api] max_body_bytes', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', extra: { blob: 'x'.repeat(1_100_000) } }, status: 413 },
  // Node fields of the wrong type or shape.
  { name: 'name: 5', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: 5 }, status: 400, message: 'name' },
  { name: 'driver_info: "x"', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', driver_info: 'x' }, status: 400, message: 'driver_info' },
  { name: 'extra: []', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', extra: [] }, status: 400, message: 'extra' },
  { name: 'properties: null', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', properties: null }, status: 400, message: 'properties' },
  { name: 'protected: "yes"', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', protected: 'yes' }, status: 400, message: 'protected' },
  { name: 'maintenance: "yes" on create', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', maintenance: 'yes' }, status: 400, message: 'maintenance' },
  { name: 'maintenance_reason on create', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', maintenance_reason: 5 }, status: 400, message: 'maintenance_reason' },
  { name: 'driver: 5', method: 'POST', url: '/v1/nodes', body: { driver: 5 }, status: 400, message: 'driver' },
  { name: 'no driver', method: 'POST', url: '/v1/nodes', body: { name: 'no-driver' }, status: 400, message: 'driver' },
  { name: 'an unknown driver', method: 'POST', url: '/v1/nodes', body: { driver: 'no-such-hw' }, status: 400, message: 'no-such-hw' },
  { name: 'an unknown field', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', colour: 'blue' }, status: 400, message: 'colour' },
  { name: 'a read-only field on create', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', provision_state: 'active' }, status: 400, message: 'provision_state' },
  { name: 'a name that is a UUID', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: '0b4f8a4e-9999-4c4c-9c9c-0123456789ab' }, status: 400 },
  { name: 'a name with spaces', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: 'has spaces' }, status: 400 },
  { name: 'a name of 256 characters', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: 'n'.repeat(256) }, status: 400 },
  { name: 'a name with a NUL character', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: 'nul\u0000name' }, status: 400 },
  { name: 'a description with a NUL character', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', description: 'a\u0000b' }, status: 400 },
  { name: 'a NUL character inside properties', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', properties: { cpu: 'x\u0000' } }, status: 400 },
  { name: 'memory_mb that is not an integer', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', properties: { memory_mb: 'lots' } }, status: 400, message: 'should be non-negative integers, but provided values are: memory_mb=lots' },
  { name: 'a negative local_gb', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', properties: { local_gb: -1, memory_mb: '4096' } }, status: 400, message: 'provided values are: local_gb=-1' },
  { name: 'memory_mb patched to a word', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'add', path: '/properties/memory_mb', value: '4 GiB' }], status: 400, message: 'memory_mb=4 GiB' },
  { name: 'a bad uuid', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', uuid: 'not-a-uuid' }, status: 400, message: 'uuid' },
  { name: 'a bad instance_uuid', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', instance_uuid: '1234' }, status: 400, message: 'instance_uuid' },
  { name: 'an unsupported power interface', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', power_interface: 'ipmitool' }, status: 400 },
  { name: 'a duplicate name', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', name: 'seed' }, status: 409, message: 'seed' },
  { name: 'a field newer than the version', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', owner: 'o' }, headers: { 'x-openstack-ironic-api-version': '1.49' }, status: 406 },
  // JSON patches.
  { name: 'patch op "move"', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'move', from: '/name', path: '/description' }], status: 400, message: 'move' },
  { name: 'patch op "copy"', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'copy', from: '/name', path: '/description' }], status: 400, message: 'copy' },
  { name: 'patch op "test"', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'test', path: '/name', value: 'seed' }], status: 400, message: 'test' },
  { name: 'patch without a path', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', value: 'x' }], status: 400 },
  { name: 'patch path without a leading /', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: 'name', value: 'x' }], status: 400 },
  { name: 'patch replace without a value', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/name' }], status: 400 },
  { name: 'patch that is an object, not a list', method: 'PATCH', url: '/v1/nodes/{node}', body: { op: 'replace', path: '/name', value: 'x' }, status: 400 },
  { name: 'an empty patch', method: 'PATCH', url: '/v1/nodes/{node}', body: [], status: 400 },
  { name: 'patch op that is not an object', method: 'PATCH', url: '/v1/nodes/{node}', body: [null], status: 400 },
  { name: 'patch path to an unknown field', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'add', path: '/colour', value: 'blue' }], status: 400, message: 'colour' },
  { name: 'patch remove /driver', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'remove', path: '/driver' }], status: 400, message: '/driver' },
  { name: 'patch replace /uuid', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/uuid', value: MISSING_UUID }], status: 400, message: '/uuid' },
  { name: 'patch replace /provision_state', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/provision_state', value: 'active' }], status: 400 },
  { name: 'patch replace /reservation', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/reservation', value: 'me' }], status: 400 },
  { name: 'patch name to 5', method: 'PATCH', url: '/v1/nodes/{node}', body: replaceName(5), status: 400 },
  { name: 'patch name to a UUID', method: 'PATCH', url: '/v1/nodes/{node}', body: replaceName(MISSING_UUID), status: 400 },
  { name: 'patch a NUL character into extra', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'add', path: '/extra/k', value: 'v\u0000' }], status: 400 },
  { name: 'patch driver_info to a string', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/driver_info', value: 'x' }], status: 400 },
  { name: 'patch remove of a missing key', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'remove', path: '/extra/nope' }], status: 400 },
  { name: 'a valid op followed by a bad one', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/description', value: 'changed' }, { op: 'replace', path: '/power_state', value: 'power on' }], status: 400 },
  { name: 'a stale If-Match', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/description', value: 'changed' }], headers: { 'if-match': '"999"' }, status: 412 },
  { name: 'a malformed If-Match', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/description', value: 'changed' }], headers: { 'if-match': 'version-two' }, status: 400 },
  { name: 'patch of an unknown node', method: 'PATCH', url: `/v1/nodes/${MISSING_UUID}`, body: replaceName('x'), status: 404 },
  { name: 'a good patch with a bad microversion', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/description', value: 'changed' }], headers: { 'x-openstack-ironic-api-version': 'abc' }, status: 400 },
  // Microversions.
  { name: 'microversion 1.x', method: 'GET', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': '1.x' }, status: 400 },
  { name: 'microversion 1.999', method: 'GET', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': '1.999' }, status: 406, message: `The supported version range is: [1.1, ${MAX_VERSION_STRING}]` },
  { name: 'microversion 3.0', method: 'GET', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': '3.0' }, status: 406, message: `The supported version range is: [1.1, ${MAX_VERSION_STRING}]` },
  { name: 'microversion abc', method: 'GET', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': 'abc' }, status: 400 },
  { name: 'OpenStack-API-Version baremetal 1.x', method: 'GET', url: '/v1/nodes', headers: { 'openstack-api-version': 'baremetal 1.x' }, status: 400 },
  // Query strings.
  { name: 'limit=0', method: 'GET', url: '/v1/nodes?limit=0', status: 400 },
  { name: 'limit=-1', method: 'GET', url: '/v1/nodes?limit=-1', status: 400 },
  { name: 'limit=abc', method: 'GET', url: '/v1/nodes?limit=abc', status: 400 },
  { name: 'limit given twice', method: 'GET', url: '/v1/nodes?limit=1&limit=2', status: 400 },
  { name: 'an unknown marker', method: 'GET', url: `/v1/nodes?marker=${MISSING_UUID}`, status: 404, message: MISSING_UUID },
  { name: 'a marker that is not a UUID', method: 'GET', url: '/v1/nodes?marker=seed', status: 400, message: 'marker' },
  { name: 'sort_key=driver_info', method: 'GET', url: '/v1/nodes?sort_key=driver_info', status: 400, message: 'driver_info' },
  { name: 'sort_key=bogus', method: 'GET', url: '/v1/nodes?sort_key=bogus', status: 400, message: 'bogus' },
  { name: 'sort_dir=sideways', method: 'GET', url: '/v1/nodes?sort_dir=sideways', status: 400, message: 'sideways' },
  { name: 'fields=bogus', method: 'GET', url: '/v1/nodes?fields=uuid,bogus', status: 400, message: 'bogus' },
  { name: 'fields below 1.8', method: 'GET', url: '/v1/nodes?fields=uuid', headers: { 'x-openstack-ironic-api-version': '1.7' }, status: 406 },
  { name: 'fields together with detail', method: 'GET', url: '/v1/nodes?detail=true&fields=uuid', status: 400 },
  { name: 'maintenance=perhaps', method: 'GET', url: '/v1/nodes?maintenance=perhaps', status: 400, message: 'maintenance' },
  { name: 'associated=2', method: 'GET', url: '/v1/nodes?associated=2', status: 400, message: 'associated' },
  { name: 'detail=maybe', method: 'GET', url: '/v1/nodes?detail=maybe', status: 400, message: 'detail' },
  { name: 'a bad instance_uuid filter', method: 'GET', url: '/v1/nodes?instance_uuid=1234', status: 400, message: 'instance_uuid' },
  { name: 'an unknown query parameter', method: 'GET', url: '/v1/nodes?colour=blue', status: 400, message: 'colour' },
  { name: 'a NUL character in a filter', method: 'GET', url: '/v1/nodes?driver=fake%00', status: 400 },
  { name: 'a NUL character in a node name', method: 'GET', url: '/v1/nodes/se%00ed', status: 400 },
  { name: 'an unknown node', method: 'GET', url: '/v1/nodes/no-such-node', status: 404, message: 'no-such-node' },
  // Provision state and maintenance.
  { name: 'an unknown provision verb', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 'fly' }, status: 400, message: '"fly"' },
  { name: 'a verb the state does not allow', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 'provide' }, status: 400, message: 'while it is in state "enroll"' },
  { name: 'target: 5', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 5 }, status: 400 },
  { name: 'no target', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: {}, status: 400 },
  { name: 'a provision body that is a list', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: ['manage'], status: 400 },
  { name: 'an unknown provision attribute', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 'manage', speed: 'fast' }, status: 400, message: 'speed' },
  { name: 'a verb newer than the version', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 'manage' }, headers: { 'x-openstack-ironic-api-version': '1.3' }, status: 406 },
  { name: 'an unknown power target', method: 'PUT', url: '/v1/nodes/{node}/states/power', body: { target: 'sideways' }, status: 400, message: 'sideways' },
  { name: 'a power timeout of 0', method: 'PUT', url: '/v1/nodes/{node}/states/power', body: { target: 'power on', timeout: 0 }, status: 400 },
  { name: 'a boot device that is not a string', method: 'PUT', url: '/v1/nodes/{node}/management/boot_device', body: { boot_device: 5 }, status: 400 },
  { name: 'maintenance reason: 5', method: 'PUT', url: '/v1/nodes/{node}/maintenance', body: { reason: 5 }, status: 400, message: 'reason' },
  { name: 'an unknown maintenance attribute', method: 'PUT', url: '/v1/nodes/{node}/maintenance', body: { reason: 'r', until: 'tomorrow' }, status: 400, message: 'until' },
  { name: 'maintenance body that is a list', method: 'PUT', url: '/v1/nodes/{node}/maintenance', body: ['r'], status: 400 },
  // Ports.
  { name: 'a bad MAC', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:zz:00:01', node_uuid: '{nodeUuid}' }, status: 400, message: '52:54:00:zz:00:01' },
  { name: 'a short MAC', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:01', node_uuid: '{nodeUuid}' }, status: 400 },
  { name: 'address: 5', method: 'POST', url: '/v1/ports', body: { address: 5, node_uuid: '{nodeUuid}' }, status: 400 },
  { name: 'a port without address', method: 'POST', url: '/v1/ports', body: { node_uuid: '{nodeUuid}' }, status: 400, message: 'address' },
  { name: 'a port without node_uuid', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09' }, status: 400, message: 'node_uuid' },
  { name: 'a bad node_uuid on a port', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: 'seed' }, status: 400, message: 'node_uuid' },
  { name: 'a port for a missing node', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: MISSING_UUID }, status: 400, message: MISSING_UUID },
  { name: 'a bad port uuid', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', uuid: 'port-1' }, status: 400, message: 'uuid' },
  { name: 'a duplicate MAC in another spelling', method: 'POST', url: '/v1/ports', body: { address: '52-54-00-00-00-01', node_uuid: '{nodeUuid}' }, status: 409 },
  { name: 'port extra: []', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', extra: [] }, status: 400 },
  { name: 'pxe_enabled: "maybe" (Ironic takes oslo boolean strings such as "yes", not this)', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', pxe_enabled: 'maybe' }, status: 400 },
  { name: 'an unknown port field', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', colour: 'red' }, status: 400, message: 'colour' },
  { name: 'a port body that is a list', method: 'POST', url: '/v1/ports', body: [{ address: '52:54:00:00:00:09' }], status: 400 },
  { name: 'patch a port to a bad MAC', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/address', value: 'nope' }], status: 400 },
  { name: 'patch remove a port address', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'remove', path: '/address' }], status: 400 },
  { name: 'patch a port with op "move"', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'move', from: '/address', path: '/extra/a' }], status: 400 },
  { name: 'patch a port onto a missing node', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/node_uuid', value: MISSING_UUID }], status: 400 },
  { name: 'patch a port uuid', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/uuid', value: MISSING_UUID }], status: 400 },
  { name: 'a port marker that is not a UUID', method: 'GET', url: '/v1/ports?marker=nope', status: 400, message: 'marker' },
  { name: 'an unknown port marker', method: 'GET', url: `/v1/ports?marker=${MISSING_UUID}`, status: 404 },
  { name: 'a bad address filter', method: 'GET', url: '/v1/ports?address=nope', status: 400 },
  { name: 'a bad node_uuid filter', method: 'GET', url: '/v1/ports?node_uuid=seed', status: 400, message: 'node_uuid' },
  { name: 'port sort_key=extra', method: 'GET', url: '/v1/ports?sort_key=extra', status: 400 },
  { name: 'port limit=0', method: 'GET', url: '/v1/ports?limit=0', status: 400 },
  { name: 'a history marker that is not a UUID', method: 'GET', url: '/v1/nodes/{node}/history?marker=first', status: 400, message: 'marker' },
  { name: 'history limit=0', method: 'GET', url: '/v1/nodes/{node}/history?limit=0', status: 400 },
  { name: 'a conductor field that does not exist', method: 'GET', url: '/v1/conductors?fields=hostname,colour', status: 400, message: 'colour' },
  { name: 'an unknown driver', method: 'GET', url: '/v1/drivers/no-such-hw', status: 404 },
  { name: 'a method /v1 does not allow', method: 'POST', url: '/v1', body: {}, status: 405 },
  { name: 'delete a port by something else than a UUID before 1.88', method: 'DELETE', url: '/v1/ports/not-a-uuid', headers: { 'x-openstack-ironic-api-version': '1.87' }, status: 400, message: 'Expected UUID for port_uuid: not-a-uuid' },
  { name: 'delete a port by a name no port has', method: 'DELETE', url: '/v1/ports/not-a-uuid', status: 404, message: 'Port not-a-uuid could not be found.' },
  { name: 'delete an unknown port', method: 'DELETE', url: `/v1/ports/${MISSING_UUID}`, status: 404, message: `Port ${MISSING_UUID} could not be found.` },
  { name: 'show a port by MAC', method: 'GET', url: '/v1/ports/52:54:00:00:00:01', status: 400, message: 'Expected UUID or name for port_ident' },
  { name: 'show a port by MAC before 1.88', method: 'GET', url: '/v1/ports/52:54:00:00:00:01', headers: { 'x-openstack-ironic-api-version': '1.87' }, status: 400, message: 'Expected UUID for port_uuid' },
  { name: 'patch a port by MAC', method: 'PATCH', url: '/v1/ports/52:54:00:00:00:01', body: [{ op: 'replace', path: '/extra/a', value: 1 }], status: 400, message: 'Expected UUID or name for port_ident' },
  { name: 'an empty physical_network', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', physical_network: '' }, status: 400, message: 'A non-empty value is required when setting physical_network' },
  { name: 'portgroup_uuid below 1.24', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', portgroup_uuid: '{pgUuid}' }, headers: { 'x-openstack-ironic-api-version': '1.23' }, status: 406 },
  { name: 'a port in a missing portgroup', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', portgroup_uuid: MISSING_UUID }, status: 400, message: `Portgroup ${MISSING_UUID} could not be found.` },
  { name: 'a portgroup_uuid that is a name', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', portgroup_uuid: 'bond0' }, status: 400, message: 'portgroup_uuid' },
  { name: 'a port in a portgroup of another node', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{otherNodeUuid}', portgroup_uuid: '{pgUuid}' }, status: 400, message: 'Port can not be added to a portgroup belonging to a different node.' },
  { name: 'a port on another physical network than its portgroup', method: 'POST', url: '/v1/ports', body: { address: '52:54:00:00:00:09', node_uuid: '{nodeUuid}', portgroup_uuid: '{pgUuid}', physical_network: 'other' }, status: 409, message: 'Port with physical network other cannot become a member of port group {pgUuid} which has ports in physical network physnet1.' },
  { name: 'patch a port into a missing portgroup', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/portgroup_uuid', value: MISSING_UUID }], status: 400, message: MISSING_UUID },
  { name: 'patch a portgroup member onto another physical network', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/physical_network', value: 'other' }], status: 409, message: 'cannot become a member of port group' },
  { name: 'patch a portgroup member onto another node', method: 'PATCH', url: '/v1/ports/{port}', body: [{ op: 'replace', path: '/node_uuid', value: '{otherNodeUuid}' }], status: 400, message: 'Port can not be added to a portgroup belonging to a different node.' },
  { name: 'the portgroup port filter below 1.24', method: 'GET', url: '/v1/ports?portgroup={pgUuid}', headers: { 'x-openstack-ironic-api-version': '1.23' }, status: 406 },
  { name: 'ports by node and portgroup at once', method: 'GET', url: '/v1/ports?portgroup={pgUuid}&node={nodeUuid}', status: 403 },
  { name: 'the ports of a missing portgroup', method: 'GET', url: `/v1/portgroups/${MISSING_UUID}/ports`, status: 404, message: MISSING_UUID },
  // Chassis.
  { name: 'a chassis description of 256 characters', method: 'POST', url: '/v1/chassis', body: { description: 'd'.repeat(256) }, status: 400, message: 'description' },
  { name: 'a chassis description that is a number', method: 'POST', url: '/v1/chassis', body: { description: 5 }, status: 400 },
  { name: 'chassis extra: []', method: 'POST', url: '/v1/chassis', body: { extra: [] }, status: 400 },
  { name: 'a bad chassis uuid', method: 'POST', url: '/v1/chassis', body: { uuid: 'chassis-1' }, status: 400, message: 'Expected UUID for uuid: chassis-1' },
  { name: 'a duplicate chassis uuid', method: 'POST', url: '/v1/chassis', body: { uuid: '{chassis}' }, status: 409, message: 'A chassis with UUID {chassis} already exists.' },
  { name: 'an unknown chassis field', method: 'POST', url: '/v1/chassis', body: { name: 'c1' }, status: 400, message: "'name' was unexpected" },
  { name: 'a chassis body that is a list', method: 'POST', url: '/v1/chassis', body: [{ description: 'x' }], status: 400 },
  { name: 'a chassis by something else than a UUID', method: 'GET', url: '/v1/chassis/rack-1', status: 400, message: 'Expected UUID for chassis_uuid: rack-1' },
  { name: 'an unknown chassis', method: 'GET', url: `/v1/chassis/${MISSING_UUID}`, status: 404, message: `Chassis ${MISSING_UUID} could not be found.` },
  { name: 'delete a chassis with nodes', method: 'DELETE', url: '/v1/chassis/{chassis}', status: 400, message: 'Cannot complete the requested action because chassis {chassis} contains nodes.' },
  { name: 'delete an unknown chassis', method: 'DELETE', url: `/v1/chassis/${MISSING_UUID}`, status: 404 },
  { name: 'patch a chassis uuid', method: 'PATCH', url: '/v1/chassis/{chassis}', body: [{ op: 'replace', path: '/uuid', value: MISSING_UUID }], status: 400, message: 'Cannot patch /uuid.' },
  { name: 'patch a chassis description too long', method: 'PATCH', url: '/v1/chassis/{chassis}', body: [{ op: 'replace', path: '/description', value: 'd'.repeat(256) }], status: 400 },
  { name: 'patch a new root attribute into a chassis', method: 'PATCH', url: '/v1/chassis/{chassis}', body: [{ op: 'add', path: '/nodes', value: [] }], status: 400 },
  { name: 'patch remove of a missing chassis extra key', method: 'PATCH', url: '/v1/chassis/{chassis}', body: [{ op: 'remove', path: '/extra/nope' }], status: 400 },
  { name: 'chassis sort_key=extra', method: 'GET', url: '/v1/chassis?sort_key=extra', status: 400, message: 'extra' },
  { name: 'chassis fields=bogus', method: 'GET', url: '/v1/chassis?fields=uuid,bogus', status: 400, message: 'bogus' },
  { name: 'chassis limit=0', method: 'GET', url: '/v1/chassis?limit=0', status: 400 },
  { name: 'an unknown chassis marker', method: 'GET', url: `/v1/chassis?marker=${MISSING_UUID}`, status: 404 },
  { name: 'the nodes of an unknown chassis', method: 'GET', url: `/v1/chassis/${MISSING_UUID}/nodes`, status: 404, message: MISSING_UUID },
  { name: 'the nodes of a chassis named by something else than a UUID', method: 'GET', url: '/v1/chassis/rack-1/nodes', status: 400 },
  { name: 'a node chassis_uuid filter that is not a UUID', method: 'GET', url: '/v1/nodes?chassis_uuid=rack-1', status: 400, message: 'chassis_uuid' },
  { name: 'a node chassis_uuid filter for an unknown chassis', method: 'GET', url: `/v1/nodes?chassis_uuid=${MISSING_UUID}`, status: 404 },
  { name: 'a node in an unknown chassis', method: 'POST', url: '/v1/nodes', body: { driver: 'fake-hardware', chassis_uuid: MISSING_UUID }, status: 400, message: `Chassis ${MISSING_UUID} could not be found.` },
  { name: 'patch a node into an unknown chassis', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'replace', path: '/chassis_uuid', value: MISSING_UUID }], status: 400, message: `Chassis ${MISSING_UUID} could not be found.` },
  { name: 'remove a node chassis below 1.25', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'remove', path: '/chassis_uuid' }], headers: { 'x-openstack-ironic-api-version': '1.24' }, status: 406 },
  // Port groups.
  { name: 'portgroups below 1.23', method: 'GET', url: '/v1/portgroups', headers: { 'x-openstack-ironic-api-version': '1.22' }, status: 404 },
  { name: 'create a portgroup below 1.23', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}' }, headers: { 'x-openstack-ironic-api-version': '1.22' }, status: 404 },
  { name: 'a node portgroups below 1.24', method: 'GET', url: '/v1/nodes/{node}/portgroups', headers: { 'x-openstack-ironic-api-version': '1.23' }, status: 404 },
  { name: 'a portgroup without node_uuid', method: 'POST', url: '/v1/portgroups', body: { name: 'bond9' }, status: 400, message: 'node_uuid' },
  { name: 'a portgroup for a missing node', method: 'POST', url: '/v1/portgroups', body: { node_uuid: MISSING_UUID }, status: 400, message: `Node ${MISSING_UUID} could not be found.` },
  { name: 'a portgroup node_uuid that is a name', method: 'POST', url: '/v1/portgroups', body: { node_uuid: 'seed' }, status: 400, message: 'node_uuid' },
  { name: 'a portgroup with a bad MAC', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', address: 'nope' }, status: 400, message: 'Expected valid MAC address for address: nope' },
  { name: 'a portgroup with a name with spaces', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', name: 'bond 9' }, status: 400, message: "Cannot create portgroup with invalid name 'bond 9'" },
  { name: 'a duplicate portgroup name', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', name: 'bond0' }, status: 409, message: 'A portgroup with name bond0 already exists.' },
  { name: 'a duplicate portgroup MAC', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', address: '52-54-00-00-0A-01' }, status: 409, message: 'A portgroup with MAC address 52:54:00:00:0a:01 already exists.' },
  { name: 'a portgroup mode below 1.26', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', mode: '802.3ad' }, headers: { 'x-openstack-ironic-api-version': '1.25' }, status: 406 },
  { name: 'portgroup standalone_ports_supported: "maybe"', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', standalone_ports_supported: 'maybe' }, status: 400 },
  { name: 'an unknown portgroup field', method: 'POST', url: '/v1/portgroups', body: { node_uuid: '{nodeUuid}', colour: 'red' }, status: 400, message: 'colour' },
  { name: 'a portgroup by a bad identifier', method: 'GET', url: '/v1/portgroups/bond%20zero', status: 400, message: 'Expected UUID or name for portgroup' },
  { name: 'an unknown portgroup', method: 'GET', url: '/v1/portgroups/bond7', status: 404, message: 'Portgroup bond7 could not be found.' },
  { name: 'portgroup fields=mode below 1.26', method: 'GET', url: '/v1/portgroups?fields=uuid,mode', headers: { 'x-openstack-ironic-api-version': '1.25' }, status: 406 },
  { name: 'portgroups by node and address at once', method: 'GET', url: '/v1/portgroups?node=seed&address=52:54:00:00:0a:01', status: 400 },
  { name: 'portgroup sort_key=properties', method: 'GET', url: '/v1/portgroups?sort_key=properties', status: 400 },
  { name: 'delete a portgroup with ports', method: 'DELETE', url: '/v1/portgroups/bond0', status: 400, message: 'Cannot complete the requested action because portgroup {pgUuid} contains ports.' },
  { name: 'patch a portgroup mode away', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'remove', path: '/mode' }], status: 400, message: "'mode' is a mandatory attribute and can not be removed" },
  { name: 'patch a portgroup internal_info', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'add', path: '/internal_info/a', value: 1 }], status: 400, message: 'Cannot patch /internal_info/a.' },
  { name: 'patch a portgroup name to an invalid one', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'replace', path: '/name', value: 'a b' }], status: 400, message: "Cannot change name to invalid name 'a b'" },
  { name: 'move a portgroup with ports to another node', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'replace', path: '/node_uuid', value: '{otherNodeUuid}' }], status: 400, message: 'because there are ports associated with this portgroup' },
  { name: 'patch a portgroup onto a missing node', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'replace', path: '/node_uuid', value: MISSING_UUID }], status: 400, message: MISSING_UUID },
  { name: 'forbid standalone ports while a member PXE-boots', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'replace', path: '/standalone_ports_supported', value: false }], status: 409, message: "contains port with 'pxe_enabled' is set to True" },
  { name: 'patch a portgroup mode below 1.26', method: 'PATCH', url: '/v1/portgroups/bond0', body: [{ op: 'replace', path: '/mode', value: '802.3ad' }], headers: { 'x-openstack-ironic-api-version': '1.25' }, status: 406 },
  { name: 'delete an unknown node', method: 'DELETE', url: `/v1/nodes/${MISSING_UUID}`, status: 404 },
  // Volume connectors and targets, and RAID configuration.
  { name: 'a connector below 1.32', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'iqn.x:new' }, headers: { 'x-openstack-ironic-api-version': '1.31' }, status: 404 },
  { name: 'a connector without type', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', connector_id: 'iqn.x:new' }, status: 400, message: "'type'" },
  { name: 'a connector of an unknown type', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'floppy', connector_id: 'iqn.x:new' }, status: 400, message: 'floppy' },
  { name: 'a connector_id of 256 characters', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'c'.repeat(256) }, status: 400, message: 'connector_id' },
  { name: 'a connector with an unknown field', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'iqn.x:new', colour: 'red' }, status: 400, message: 'colour' },
  { name: 'a connector for a missing node', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: MISSING_UUID, type: 'iqn', connector_id: 'iqn.x:new' }, status: 400, message: MISSING_UUID },
  { name: 'a connector for a node named, not by UUID', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: 'seed', type: 'iqn', connector_id: 'iqn.x:new' }, status: 400, message: 'node_uuid' },
  { name: 'a duplicate connector type and id', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'iqn.x:seed' }, status: 409, message: 'already exists' },
  { name: 'a connector extra that is a list', method: 'POST', url: '/v1/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'iqn.x:new', extra: [] }, status: 400, message: 'extra' },
  { name: 'a connector posted below a node', method: 'POST', url: '/v1/nodes/{node}/volume/connectors', body: { node_uuid: '{nodeUuid}', type: 'iqn', connector_id: 'iqn.x:new' }, status: 400, message: 'Malformed' },
  { name: 'patch a connector uuid', method: 'PATCH', url: '/v1/volume/connectors/{connector}', body: [{ op: 'replace', path: '/uuid', value: MISSING_UUID }], status: 400, message: 'Cannot patch /uuid' },
  { name: 'patch a connector on a node not powered off', method: 'PATCH', url: '/v1/volume/connectors/{connector}', body: [{ op: 'replace', path: '/connector_id', value: 'iqn.x:other' }], status: 400, message: 'volume connector update' },
  { name: 'delete a connector on a node not powered off', method: 'DELETE', url: '/v1/volume/connectors/{connector}', status: 400, message: 'volume connector deletion' },
  { name: 'a connector marker that is not a UUID', method: 'GET', url: '/v1/volume/connectors?marker=first', status: 400, message: 'marker' },
  { name: 'an unknown connector', method: 'GET', url: `/v1/volume/connectors/${MISSING_UUID}`, status: 404, message: MISSING_UUID },
  { name: 'connector sort_key=extra', method: 'GET', url: '/v1/volume/connectors?sort_key=extra', status: 400 },
  { name: 'a target boot_index that is a string', method: 'POST', url: '/v1/volume/targets', body: { node_uuid: '{nodeUuid}', volume_type: 'iscsi', volume_id: 'v', boot_index: '1' }, status: 400, message: 'boot_index' },
  { name: 'a target without volume_id', method: 'POST', url: '/v1/volume/targets', body: { node_uuid: '{nodeUuid}', volume_type: 'iscsi', boot_index: 1 }, status: 400, message: "'volume_id'" },
  { name: 'a target volume_id of 37 characters', method: 'POST', url: '/v1/volume/targets', body: { node_uuid: '{nodeUuid}', volume_type: 'iscsi', volume_id: 'v'.repeat(37), boot_index: 1 }, status: 400, message: 'volume_id' },
  { name: 'a duplicate boot index on one node', method: 'POST', url: '/v1/volume/targets', body: { node_uuid: '{nodeUuid}', volume_type: 'iscsi', volume_id: 'v2', boot_index: 0 }, status: 409, message: "boot index '0'" },
  { name: 'patch remove a target volume_type', method: 'PATCH', url: '/v1/volume/targets/{target}', body: [{ op: 'remove', path: '/volume_type' }], status: 400, message: '/volume_type' },
  { name: 'target sort_key=properties', method: 'GET', url: '/v1/volume/targets?sort_key=properties', status: 400 },
  { name: 'targets with fields and detail', method: 'GET', url: '/v1/volume/targets?fields=uuid&detail=true', status: 400 },
  { name: 'a RAID level RAID does not have', method: 'PUT', url: '/v1/nodes/{node}/states/raid', body: { logical_disks: [{ size_gb: 10, raid_level: '7' }] }, status: 400, message: "'7' is not one of" },
  { name: 'a RAID size that is not a number or MAX', method: 'PUT', url: '/v1/nodes/{node}/states/raid', body: { logical_disks: [{ size_gb: 'lots', raid_level: '1' }] }, status: 400, message: "'lots'" },
  { name: 'two RAID root volumes', method: 'PUT', url: '/v1/nodes/{node}/states/raid', body: { logical_disks: [{ size_gb: 1, raid_level: '1', is_root_volume: true }, { size_gb: 1, raid_level: '1', is_root_volume: true }] }, status: 400, message: 'more than one root volume' },
  { name: 'a RAID configuration that is a list', method: 'PUT', url: '/v1/nodes/{node}/states/raid', body: [{ size_gb: 1, raid_level: '1' }], status: 400 },
  { name: 'a RAID configuration below 1.12', method: 'PUT', url: '/v1/nodes/{node}/states/raid', body: { logical_disks: [{ size_gb: 1, raid_level: '1' }] }, headers: { 'x-openstack-ironic-api-version': '1.11' }, status: 406 },
  { name: 'RAID properties of an unknown driver', method: 'GET', url: '/v1/drivers/no-such-hw/raid/logical_disk_properties', status: 404 },
  // Traits.
  { name: 'a trait that is not CUSTOM_ or standard', method: 'PUT', url: '/v1/nodes/{node}/traits/lower_case', status: 400, message: 'lower_case' },
  { name: 'traits that are not a list', method: 'PUT', url: '/v1/nodes/{node}/traits', body: { traits: 'CUSTOM_A' }, status: 400 },
  { name: 'a traits body without traits', method: 'PUT', url: '/v1/nodes/{node}/traits', body: { trait: ['CUSTOM_A'] }, status: 400 },
  { name: '51 traits', method: 'PUT', url: '/v1/nodes/{node}/traits', body: { traits: Array.from({ length: 51 }, (_, i) => `CUSTOM_${i}`) }, status: 400, message: '(51 vs. 50)' },
  { name: 'a body with a single trait', method: 'PUT', url: '/v1/nodes/{node}/traits/CUSTOM_A', body: { traits: ['CUSTOM_B'] }, status: 400 },
  { name: 'removing a trait the node lacks', method: 'DELETE', url: '/v1/nodes/{node}/traits/CUSTOM_NONE', status: 404, message: "doesn't have a trait 'CUSTOM_NONE'" },
  { name: 'traits before 1.37', method: 'PUT', url: '/v1/nodes/{node}/traits/CUSTOM_A', headers: { 'x-openstack-ironic-api-version': '1.36' }, status: 405 },
  { name: 'a PATCH of /traits', method: 'PATCH', url: '/v1/nodes/{node}', body: [{ op: 'add', path: '/traits', value: ['CUSTOM_A'] }], status: 400 },
  // Allocations.
  { name: 'an allocation without resource_class', method: 'POST', url: '/v1/allocations', body: {}, status: 400, message: 'The resource_class field is mandatory when not backfilling' },
  { name: 'an allocation with an invalid name', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x', name: 'a b' }, status: 400, message: "Cannot create allocation with invalid name 'a b'" },
  { name: 'an allocation with a bad trait', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x', traits: ['bad'] }, status: 400 },
  { name: 'an allocation with an unknown candidate', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x', candidate_nodes: ['nowhere'] }, status: 400, message: 'nowhere' },
  { name: 'an allocation with an unknown field', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x', color: 1 }, status: 400, message: 'color' },
  { name: 'an allocation resource_class of 81 characters', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x'.repeat(81) }, status: 400 },
  { name: 'backfill of a node that is not active', method: 'POST', url: '/v1/allocations', body: { node: '{node}' }, status: 400, message: 'Node must be in the "active" state' },
  { name: 'backfill before 1.58', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x', node: '{node}' }, headers: { 'x-openstack-ironic-api-version': '1.57' }, status: 400 },
  { name: 'an allocation before 1.52', method: 'POST', url: '/v1/allocations', body: { resource_class: 'x' }, headers: { 'x-openstack-ironic-api-version': '1.51' }, status: 405 },
  { name: 'allocations owner filter before 1.60', method: 'GET', url: '/v1/allocations?owner=p', headers: { 'x-openstack-ironic-api-version': '1.59' }, status: 406 },
  { name: 'allocations sort_key=traits', method: 'GET', url: '/v1/allocations?sort_key=traits', status: 400 },
  { name: 'an unknown allocation', method: 'GET', url: `/v1/allocations/${MISSING_UUID}`, status: 404 },
  { name: 'the allocation of a node without one', method: 'DELETE', url: '/v1/nodes/{node}/allocation', status: 404, message: 'Allocation for node seed was not found' },
  // Deploy templates.
  { name: 'a deploy template named like no trait', method: 'POST', url: '/v1/deploy_templates', body: { name: 'plain', steps: [{ interface: 'bios', step: 's', args: {}, priority: 1 }] }, status: 400 },
  { name: 'a deploy template without steps', method: 'POST', url: '/v1/deploy_templates', body: { name: 'CUSTOM_A' }, status: 400, message: "'steps' is a required property" },
  { name: 'a deploy step of an unknown interface', method: 'POST', url: '/v1/deploy_templates', body: { name: 'CUSTOM_A', steps: [{ interface: 'network', step: 's', args: {}, priority: 1 }] }, status: 400 },
  { name: 'a deploy step with a negative priority', method: 'POST', url: '/v1/deploy_templates', body: { name: 'CUSTOM_A', steps: [{ interface: 'bios', step: 's', args: {}, priority: -1 }] }, status: 400 },
  { name: 'duplicate deploy steps', method: 'POST', url: '/v1/deploy_templates', body: { name: 'CUSTOM_A', steps: [{ interface: 'bios', step: 's', args: {}, priority: 1 }, { interface: 'bios', step: 's', args: {}, priority: 2 }] }, status: 400, message: 'Duplicate deploy steps' },
  { name: 'a deploy template before 1.55', method: 'POST', url: '/v1/deploy_templates', body: { name: 'CUSTOM_A', steps: [{ interface: 'bios', step: 's', args: {}, priority: 1 }] }, headers: { 'x-openstack-ironic-api-version': '1.54' }, status: 405 },
  { name: 'an unknown deploy template', method: 'GET', url: '/v1/deploy_templates/CUSTOM_NONE', status: 404 },
];

/**
 * Provisioning requests, on nodes seeded in the states they need (no conductor runs here):
 * `prov-avail` (redfish, virtual media, ramdisk, available, no boot_iso), `prov-badiso`
 * (same, boot_iso not a URL the BMC can fetch), `prov-kernel` (kernel and ramdisk, no ISO),
 * `prov-active` (active and protected), `prov-maint` (fake-hardware, available, in maintenance).
 */
const PROVISION = (node: string, body: unknown, headers?: Record<string, string>) => ({ method: 'PUT' as const, url: `/v1/nodes/${node}/states/provision`, body, ...(headers ? { headers } : {}) });
const PROVISION_CASES: BadRequest[] = [
  { name: 'deploy without instance_info boot_iso', ...PROVISION('prov-avail', { target: 'active' }), status: 400, message: "Missing are: ['boot_iso']" },
  { name: 'deploy (1.73 verb) without boot_iso', ...PROVISION('prov-avail', { target: 'deploy' }), status: 400, message: 'Failed to validate deploy or power info for node' },
  { name: 'deploy with a boot_iso that is not a URL', ...PROVISION('prov-badiso', { target: 'active' }), status: 400, message: 'boot_iso' },
  { name: 'deploy with kernel and ramdisk but no boot_iso', ...PROVISION('prov-kernel', { target: 'active' }), status: 400, message: 'boot_iso' },
  { name: 'a config drive above [api] max_body_bytes', ...PROVISION('prov-avail', { target: 'active', configdrive: 'H4sI'.repeat(300_000) }), status: 413 },
  { name: 'a config drive that is a number', ...PROVISION('prov-avail', { target: 'active', configdrive: 5 }), status: 400, message: 'configdrive' },
  { name: 'a config drive that is a list', ...PROVISION('prov-avail', { target: 'active', configdrive: ['user_data'] }), status: 400, message: 'configdrive' },
  { name: 'a config drive dict below 1.56', ...PROVISION('prov-avail', { target: 'active', configdrive: { user_data: 'x' } }, { 'x-openstack-ironic-api-version': '1.55' }), status: 400, message: '1.56' },
  { name: 'config drive vendor_data below 1.59', ...PROVISION('prov-avail', { target: 'active', configdrive: { vendor_data: {} } }, { 'x-openstack-ironic-api-version': '1.58' }), status: 400, message: 'vendor_data' },
  { name: 'a config drive dict with an unknown key', ...PROVISION('prov-avail', { target: 'active', configdrive: { user_data: 'x', colour: 'red' } }), status: 400, message: 'colour' },
  { name: 'config drive meta_data that is a string', ...PROVISION('prov-avail', { target: 'active', configdrive: { meta_data: 'x' } }), status: 400, message: 'meta_data' },
  { name: 'a config drive with manage', ...PROVISION('prov-avail', { target: 'manage', configdrive: 'H4sI' }), status: 400, message: 'config drive' },
  { name: 'a config drive with undeploy', ...PROVISION('prov-active', { target: 'deleted', configdrive: 'H4sI' }), status: 400, message: 'config drive' },
  { name: 'a config drive with the deploy alias (Ironic allows it only with active)', ...PROVISION('prov-avail', { target: 'deploy', configdrive: 'H4sI' }), status: 400, message: 'provision state to active, rebuild' },
  { name: 'a config drive with rebuild below 1.35', ...PROVISION('prov-active', { target: 'rebuild', configdrive: 'H4sI' }, { 'x-openstack-ironic-api-version': '1.34' }), status: 400, message: 'provision state to active' },
  { name: 'deploy_steps with provide', ...PROVISION('prov-avail', { target: 'provide', deploy_steps: [] }), status: 400, message: 'deploy_steps' },
  { name: 'deploy_steps below 1.69', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [] }, { 'x-openstack-ironic-api-version': '1.68' }), status: 406 },
  { name: 'deploy_steps that is not a list', ...PROVISION('prov-avail', { target: 'active', deploy_steps: { step: 'deploy' } }), status: 400, message: 'deploy_steps' },
  { name: 'a deploy step of an unknown interface', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'hyperdrive', step: 'deploy', priority: 100 }] }), status: 400, message: 'interface' },
  { name: 'a deploy step with a negative priority', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'deploy', priority: -1 }] }), status: 400, message: 'priority' },
  // Ironic validates the node's deploy (validate_node) before the user's steps: this node lacks its boot_iso.
  { name: 'a deploy step the node does not have', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'bios', step: 'apply_configuration', args: {}, priority: 90 }] }), status: 400, message: 'boot_iso' },
  { name: 'a deploy step without its priority', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'deploy', args: {} }] }), status: 400, message: "'priority' is a required property" },
  { name: 'a deploy step without its args', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'deploy', priority: 100 }] }), status: 400, message: "'args' is a required property" },
  { name: 'a deploy step with a priority that is a word', ...PROVISION('prov-avail', { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'deploy', args: {}, priority: 'high' }] }), status: 400, message: 'priority' },
  { name: 'clean without clean_steps', ...PROVISION('prov-avail', { target: 'clean' }), status: 400, message: '"clean_steps" is required' },
  { name: 'clean_steps with manage', ...PROVISION('prov-avail', { target: 'manage', clean_steps: [] }), status: 400, message: 'clean_steps' },
  { name: 'clean_steps that is not a list', ...PROVISION('seed', { target: 'clean', clean_steps: 'erase' }), status: 400, message: 'clean_steps' },
  { name: 'a clean step without its step', ...PROVISION('seed', { target: 'clean', clean_steps: [{ interface: 'deploy' }] }), status: 400, message: 'step' },
  { name: 'clean below 1.15', ...PROVISION('prov-avail', { target: 'clean', clean_steps: [] }, { 'x-openstack-ironic-api-version': '1.14' }), status: 406 },
  { name: 'clean of an available node', ...PROVISION('prov-avail', { target: 'clean', clean_steps: [{ interface: 'deploy', step: 'erase_devices' }] }), status: 400, message: 'while it is in state "available"' },
  { name: 'disable_ramdisk with deploy', ...PROVISION('prov-avail', { target: 'active', disable_ramdisk: true }), status: 400, message: 'disable_ramdisk' },
  { name: 'target: null', ...PROVISION('prov-avail', { target: null }), status: 400 },
  { name: 'deploy of an enrolled node', ...PROVISION('seed', { target: 'active' }), status: 400, message: 'while it is in state "enroll"' },
  { name: 'undeploy of an available node', ...PROVISION('prov-avail', { target: 'deleted' }), status: 400, message: 'while it is in state "available"' },
  { name: 'rebuild of an available node', ...PROVISION('prov-avail', { target: 'rebuild' }), status: 400, message: 'while it is in state "available"' },
  { name: 'inspect of an available node', ...PROVISION('prov-avail', { target: 'inspect' }), status: 400, message: 'The requested action "inspect" can not be performed on node' },
  { name: 'provide of an active node', ...PROVISION('prov-active', { target: 'provide' }), status: 400, message: 'while it is in state "active"' },
  { name: 'deploy of an active node', ...PROVISION('prov-active', { target: 'active' }), status: 400, message: 'while it is in state "active"' },
  { name: 'abort of an available node', ...PROVISION('prov-avail', { target: 'abort' }), status: 400, message: 'while it is in state "available"' },
  { name: 'the deploy verb below 1.73', ...PROVISION('prov-avail', { target: 'deploy' }, { 'x-openstack-ironic-api-version': '1.72' }), status: 406 },
  { name: 'the undeploy verb below 1.73', ...PROVISION('prov-active', { target: 'undeploy' }, { 'x-openstack-ironic-api-version': '1.72' }), status: 406 },
  { name: 'rebuild of a protected node', ...PROVISION('prov-active', { target: 'rebuild' }), status: 403, message: 'protected' },
  { name: 'undeploy of a protected node', ...PROVISION('prov-active', { target: 'deleted' }), status: 403, message: 'protected' },
  { name: 'deploy of a node in maintenance', ...PROVISION('prov-maint', { target: 'active' }), status: 400, message: 'maintenance' },
  { name: 'an unknown boot interface on create', method: 'POST', url: '/v1/nodes', body: { driver: 'redfish', boot_interface: 'floppy-net' }, status: 400, message: 'floppy-net' },
  { name: 'an unknown deploy interface by patch', method: 'PATCH', url: '/v1/nodes/prov-avail', body: [{ op: 'replace', path: '/deploy_interface', value: 'direct-to-disk' }], status: 400, message: 'direct-to-disk' },
  { name: 'an inspect interface the hardware type lacks', method: 'PATCH', url: '/v1/nodes/prov-maint', body: [{ op: 'replace', path: '/inspect_interface', value: 'redfish' }], status: 400, message: 'redfish' },
  { name: 'an interface change on an active node', method: 'PATCH', url: '/v1/nodes/prov-active', body: [{ op: 'replace', path: '/inspect_interface', value: 'no-inspect' }], status: 409 },
  { name: 'protected on an available node', method: 'PATCH', url: '/v1/nodes/prov-avail', body: [{ op: 'replace', path: '/protected', value: true }], status: 409, message: 'protected' },
  { name: 'protected_reason without protected', method: 'PATCH', url: '/v1/nodes/prov-avail', body: [{ op: 'replace', path: '/protected_reason', value: 'mine' }], status: 400, message: 'protected_reason' },
  { name: 'protected below 1.48', method: 'PATCH', url: '/v1/nodes/prov-active', body: [{ op: 'replace', path: '/protected', value: false }], headers: { 'x-openstack-ironic-api-version': '1.47' }, status: 406 },
  { name: 'instance_uuid overwritten on an active node', method: 'PATCH', url: '/v1/nodes/prov-active', body: [{ op: 'replace', path: '/instance_uuid', value: MISSING_UUID }], status: 409, message: 'is associated with instance' },
  // Ironic's destroy_node looks at the instance before the state: an active node has one.
  { name: 'delete of an active node', method: 'DELETE', url: '/v1/nodes/prov-active', status: 409, message: 'is associated with instance' },
];
CASES.push(...PROVISION_CASES);

interface Snapshot {
  nodes: Record<string, unknown>;
  ports: Record<string, unknown>;
  intents: Record<string, unknown>;
  traits: Record<string, unknown>;
  allocations: Record<string, unknown>;
  deployTemplates: Record<string, unknown>;
  chassis: Record<string, unknown>;
  portgroups: Record<string, unknown>;
  volume: Record<string, unknown>;
}

/** Everything a request could have changed: counts, high-water marks and a hash of every row. */
async function snapshot(knex: Knex): Promise<Snapshot> {
  const one = async (sql: string): Promise<Record<string, unknown>> => ((await knex.raw(sql)) as { rows: Array<Record<string, unknown>> }).rows[0];
  return {
    nodes: await one(`select count(*)::int as count, max(updated_at)::text as max_updated_at, coalesce(sum(version), 0)::text as sum_version,
      md5(coalesce(string_agg(n::text, '|' order by n.id), '')) as hash from nodes n`),
    ports: await one(`select count(*)::int as count, max(updated_at)::text as max_updated_at,
      md5(coalesce(string_agg(p::text, '|' order by p.id), '')) as hash from ports p`),
    intents: await one(`select count(*)::int as count, md5(coalesce(string_agg(i::text, '|' order by i.id), '')) as hash from intents i`),
    traits: await one(`select count(*)::int as count, md5(coalesce(string_agg(t::text, '|' order by t.node_id, t.trait), '')) as hash from node_traits t`),
    allocations: await one(`select count(*)::int as count, md5(coalesce(string_agg(a::text, '|' order by a.id), '')) as hash from allocations a`),
    deployTemplates: await one(`select count(*)::int as count, md5(coalesce(string_agg(d::text, '|' order by d.id), '')) as hash from deploy_templates d`),
    chassis: await one(`select count(*)::int as count, md5(coalesce(string_agg(c::text, '|' order by c.id), '')) as hash from chassis c`),
    portgroups: await one(`select count(*)::int as count, md5(coalesce(string_agg(g::text, '|' order by g.id), '')) as hash from portgroups g`),
    volume: await one(`select (select md5(coalesce(string_agg(c::text, '|' order by c.id), '')) from volume_connectors c) as connectors,
      (select md5(coalesce(string_agg(t::text, '|' order by t.id), '')) from volume_targets t) as targets`),
  };
}

describe('malformed API requests', function () {
  let t: TestApp;
  let nodeUuid: string;
  let portUuid: string;
  let chassisUuid: string;
  let otherNodeUuid: string;
  let pgUuid: string;
  let connectorUuid: string;
  let targetUuid: string;

  before(async () => {
    // No conductor: nothing but the requests under test may touch the database.
    t = await buildTestApp({}, { conductor: false });
    const latest = { 'x-openstack-ironic-api-version': 'latest' };
    const create = async (url: string, payload: object): Promise<string> => {
      const res = await t.app.inject({ method: 'POST', url, headers: latest, payload });
      expect(res.statusCode, res.body).to.equal(201);
      return res.json<{ uuid: string }>().uuid;
    };
    chassisUuid = await create('/v1/chassis', { description: 'rack 1' });
    nodeUuid = await create('/v1/nodes', { name: 'seed', driver: 'fake-hardware', driver_info: { ipmi_password: 'pw' }, extra: { k: 'v' }, chassis_uuid: chassisUuid });
    otherNodeUuid = await create('/v1/nodes', { name: 'other', driver: 'fake-hardware' });
    pgUuid = await create('/v1/portgroups', { node_uuid: nodeUuid, name: 'bond0', address: '52:54:00:00:0a:01' });
    portUuid = await create('/v1/ports', { address: '52:54:00:00:00:01', node_uuid: nodeUuid, portgroup_uuid: pgUuid, physical_network: 'physnet1' });
    // A second member, so that the first cannot leave the group's physical network.
    await create('/v1/ports', { address: '52:54:00:00:00:02', node_uuid: nodeUuid, portgroup_uuid: pgUuid, physical_network: 'physnet1' });
    // The seed node's power state is unknown (no conductor): its volume records cannot change.
    connectorUuid = await create('/v1/volume/connectors', { node_uuid: nodeUuid, type: 'iqn', connector_id: 'iqn.x:seed' });
    targetUuid = await create('/v1/volume/targets', { node_uuid: nodeUuid, volume_type: 'iscsi', volume_id: 'vol-seed', boot_index: 0 });
    // Provisioning: nodes put straight into the states the cases need.
    const redfish = (name: string, instanceInfo: Record<string, unknown> = {}) => create('/v1/nodes', {
      name, driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'ramdisk', inspect_interface: 'redfish',
      driver_info: { redfish_address: 'http://127.0.0.1:9', redfish_username: 'admin', redfish_password: 'pw' }, instance_info: instanceInfo,
    });
    await redfish('prov-avail');
    await redfish('prov-badiso', { boot_iso: 'live.iso' });
    await redfish('prov-kernel', { kernel: 'http://images.example/vmlinuz', ramdisk: 'http://images.example/initrd' });
    await redfish('prov-active', { boot_iso: 'http://images.example/live.iso' });
    await create('/v1/nodes', { name: 'prov-maint', driver: 'fake-hardware', boot_interface: 'fake', deploy_interface: 'fake' });
    const db = t.tdb.knex;
    await db('nodes').whereIn('name', ['prov-avail', 'prov-badiso', 'prov-kernel', 'prov-maint']).update({ provision_state: 'available', power_state: 'power off' });
    await db('nodes').where({ name: 'prov-active' }).update({ provision_state: 'active', power_state: 'power on', protected: true, protected_reason: 'in use', instance_uuid: '5e0c2ef6-1f4d-4c3f-9a4e-0d1f7a9b2c3d' });
    await db('nodes').where({ name: 'prov-maint' }).update({ maintenance: true, maintenance_reason: 'repairs' });
  });

  after(async () => {
    await t?.close();
  });

  it(`answers each of ${CASES.length} malformed requests with a 4xx, Ironic's error body and no change`, async () => {
    expect(CASES.length).to.be.at.least(45);
    const fill = (s: string): string => s.replaceAll('{node}', 'seed').replaceAll('{port}', portUuid).replaceAll('{nodeUuid}', nodeUuid)
      .replaceAll('{otherNodeUuid}', otherNodeUuid).replaceAll('{chassis}', chassisUuid).replaceAll('{pgUuid}', pgUuid)
      .replaceAll('{connector}', connectorUuid).replaceAll('{target}', targetUuid);
    const before = await snapshot(t.tdb.knex);
    expect(before.nodes.count).to.equal(2 + 5);
    expect(before.ports.count).to.equal(2);
    expect(before.chassis.count).to.equal(1);
    expect(before.portgroups.count).to.equal(1);
    const problems: string[] = [];
    for (const c of CASES) {
      const payload = c.body === undefined ? undefined : typeof c.body === 'string' ? c.body : JSON.parse(fill(JSON.stringify(c.body))) as object;
      const res = await t.app.inject({
        method: c.method, url: fill(c.url),
        // The case's own version header, if any, is the only one sent.
        headers: { ...(c.headers?.['openstack-api-version'] === undefined ? { 'x-openstack-ironic-api-version': 'latest' } : {}), ...c.headers },
        ...(payload === undefined ? {} : { payload }),
      });
      const where = `${c.name} (${c.method} ${c.url})`;
      if (res.statusCode !== c.status) problems.push(`${where}: status ${res.statusCode}, expected ${c.status}: ${res.body.slice(0, 300)}`);
      if (res.statusCode < 400 || res.statusCode >= 500) problems.push(`${where}: not a 4xx`);
      try {
        const fault = faultOf(res.body);
        if (fault.faultcode !== 'Client') problems.push(`${where}: faultcode ${fault.faultcode}`);
        if (typeof fault.faultstring !== 'string' || fault.faultstring === '') problems.push(`${where}: empty faultstring`);
        else if (c.message !== undefined && !fault.faultstring.includes(fill(c.message))) {
          problems.push(`${where}: faultstring ${JSON.stringify(fault.faultstring)} lacks ${JSON.stringify(c.message)}`);
        }
      } catch (err) {
        problems.push(`${where}: not Ironic's error body (${(err as Error).message}): ${res.body.slice(0, 200)}`);
      }
      for (const h of ['x-openstack-ironic-api-minimum-version', 'x-openstack-ironic-api-maximum-version', 'x-openstack-ironic-api-version']) {
        if (typeof res.headers[h] !== 'string') problems.push(`${where}: no ${h} header`);
      }
      const after = await snapshot(t.tdb.knex);
      try {
        expect(after).to.deep.equal(before);
      } catch {
        problems.push(`${where}: the database changed: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
        break;
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});
