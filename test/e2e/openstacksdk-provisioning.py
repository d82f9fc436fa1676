"""Drives one node through Galvanic's provisioning flow with openstacksdk, unchanged.

Usage: openstacksdk-provisioning.py ENDPOINT SCENARIO JSON_ARGS

Prints one JSON object per step on stdout ({"step": ..., ...}); the test asserts on them.
A step that raises prints {"step": ..., "error": ..., "type": ...} and the script goes on
only where the scenario expects the failure.
"""
import json
import sys
import urllib.request

import openstack
from openstack import exceptions


def emit(step, **fields):
    print(json.dumps({'step': step, **fields}), flush=True)


def view(node):
    return {
        'provision_state': node.provision_state,
        'target_provision_state': node.target_provision_state,
        'power_state': node.power_state,
        'last_error': node.last_error,
        'properties': node.properties,
        'instance_info': node.instance_info,
        'boot_interface': node.boot_interface,
        'deploy_interface': node.deploy_interface,
        'inspect_interface': node.inspect_interface,
    }


def connect(endpoint):
    return openstack.connect(auth_type='none', auth={'endpoint': endpoint}, baremetal_endpoint_override=endpoint)


def redfish_flow(conn, args):
    # register_machine posts at 1.6, before the interface fields existed: they are set next.
    node = conn.register_machine(
        nics=[{'mac': args['mac']}], wait=True, timeout=60, name=args['name'], driver='redfish',
        driver_info={'redfish_address': args['bmc'], 'redfish_username': 'admin',
                     'redfish_password': 'password', 'redfish_system_id': '/redfish/v1/Systems/System.Embedded.1'})
    emit('register_machine', **view(node))
    node = conn.baremetal.update_node(node, boot_interface='redfish-virtual-media', deploy_interface='ramdisk',
                                      inspect_interface='redfish')
    emit('update_node', **view(node))
    # From available: openstacksdk manages, inspects and provides again.
    node = conn.inspect_machine(node.id, wait=True, timeout=60)
    emit('inspect_machine', **view(node), ports=sorted(p.address for p in conn.baremetal.ports(node_id=node.id)))
    try:
        conn.validate_machine(node.id, for_deploy=True)
        emit('validate_machine_without_iso', ok=True)
    except exceptions.ValidationException as e:
        emit('validate_machine_without_iso', ok=False, error=str(e))
    node = conn.baremetal.update_node(node, instance_info={'boot_iso': args['iso']})
    conn.validate_machine(node.id, for_deploy=True)
    emit('validate_machine', ok=True)
    node = conn.baremetal.set_node_provision_state(
        node, 'active', config_drive={'meta_data': {'hostname': args['name']}, 'user_data': '#cloud-config\n'},
        wait=True, timeout=60)
    emit('active', **view(conn.baremetal.get_node(node.id)))
    node = conn.baremetal.set_node_provision_state(node, 'deleted', wait=True, timeout=60)
    emit('deleted', **view(conn.baremetal.get_node(node.id)))


def failing_deploy(conn, args):
    node = conn.baremetal.create_node(
        name=args['name'], driver='redfish', boot_interface='redfish-virtual-media', deploy_interface='ramdisk',
        inspect_interface='redfish',
        driver_info={'redfish_address': args['bmc'], 'redfish_username': 'admin', 'redfish_password': 'password',
                     'redfish_system_id': '/redfish/v1/Systems/System.Embedded.1'},
        instance_info={'boot_iso': args['iso']})
    node = conn.baremetal.set_node_provision_state(node, 'manage', wait=True, timeout=60)
    node = conn.baremetal.set_node_provision_state(node, 'provide', wait=True, timeout=60)
    emit('provide', **view(node))
    try:
        conn.baremetal.set_node_provision_state(node, 'active', wait=True, timeout=60)
        emit('active', ok=True)
    except exceptions.ResourceFailure as e:
        emit('active', ok=False, type=type(e).__name__, error=str(e))
    emit('after', **view(conn.baremetal.get_node(node.id)))


def agent_inspect(conn, args):
    node = conn.baremetal.create_node(
        name=args['name'], driver='redfish', boot_interface='redfish-virtual-media', deploy_interface='ramdisk',
        inspect_interface='agent',
        driver_info={'redfish_address': args['bmc'], 'redfish_username': 'admin', 'redfish_password': 'password',
                     'deploy_iso': args['iso']})
    node = conn.baremetal.set_node_provision_state(node, 'manage', wait=True, timeout=60)
    node = conn.baremetal.set_node_provision_state(node, 'inspect', wait=True, timeout=90)
    emit('inspect', **view(conn.baremetal.get_node(node.id)),
         ports=sorted(p.address for p in conn.baremetal.ports(node_id=node.id)))


def sim_disk(bmc):
    """What the simulated host's disk holds (the simulator's witness, not part of any API)."""
    with urllib.request.urlopen(bmc + '/_sim/agent') as res:
        return json.load(res)['disk']


def direct_deploy(conn, args):
    # Stopped at manageable: the SDK would otherwise provide it too, before it has ports.
    node = conn.baremetal.create_node(
        name=args['name'], driver='redfish', boot_interface='redfish-virtual-media', deploy_interface='direct',
        inspect_interface='no-inspect', provision_state='manageable',
        driver_info={'redfish_address': args['bmc'], 'redfish_username': 'admin', 'redfish_password': 'password',
                     'deploy_iso': args['iso']})
    # The agent looks its node up by the MACs of its NICs.
    for mac in args['macs']:
        conn.baremetal.create_port(node_id=node.id, address=mac)
    # From manageable, provide cleans through the agent first (automated cleaning).
    node = conn.baremetal.set_node_provision_state(node, 'provide', wait=True, timeout=90)
    emit('provide', **view(node))
    node = conn.baremetal.update_node(node, instance_info={'image_source': args['image'],
                                                           'image_checksum': args['checksum']})
    conn.validate_machine(node.id, for_deploy=True)
    emit('validate_machine', ok=True)
    node = conn.baremetal.set_node_provision_state(node, 'active', wait=True, timeout=90)
    emit('active', **view(conn.baremetal.get_node(node.id)), disk=sim_disk(args['bmc']))
    # Undeploy: tear down, then automated cleaning through the agent again, to available.
    node = conn.baremetal.set_node_provision_state(node, 'deleted', wait=True, timeout=90)
    emit('deleted', **view(conn.baremetal.get_node(node.id)))


SCENARIOS = {'redfish': redfish_flow, 'failing-deploy': failing_deploy, 'agent-inspect': agent_inspect,
             'direct-deploy': direct_deploy}


def main():
    endpoint, scenario, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    conn = connect(endpoint)
    try:
        SCENARIOS[scenario](conn, args)
    except Exception as e:  # reported, so that the test shows what the client saw
        emit('error', type=type(e).__name__, error=str(e))
        sys.exit(1)


if __name__ == '__main__':
    main()
