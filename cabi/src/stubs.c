/*
 * stubs.c — generated from the PMIx_* functions that Debian's
 * libpmix.so.2 (OpenPMIx 4.2.2, `nm -D --defined-only`) exports and
 * pmixbus does not implement yet. Each is present, so that a program or a
 * plugin that links them with immediate binding (Open MPI's components)
 * loads, and each returns PMIX_ERR_NOT_SUPPORTED (-47) without touching
 * its arguments; the two that return bool return false.
 *
 * This file does not include pmix.h: the stubs take no parameters, which
 * the x86_64 calling convention makes safe for any caller.
 */
#include <stdbool.h>

#define STUB(name) \
    __attribute__((visibility("default"))) int name(void) { return -47; }

STUB(PMIx_Allocation_request)
STUB(PMIx_Allocation_request_nb)
STUB(PMIx_Compute_distances)
STUB(PMIx_Compute_distances_nb)
STUB(PMIx_Data_copy)
STUB(PMIx_Data_copy_payload)
STUB(PMIx_Data_embed)
STUB(PMIx_Data_load)
STUB(PMIx_Data_pack)
STUB(PMIx_Data_print)
STUB(PMIx_Data_unload)
STUB(PMIx_Data_unpack)
STUB(PMIx_Fabric_deregister)
STUB(PMIx_Fabric_deregister_nb)
STUB(PMIx_Fabric_register)
STUB(PMIx_Fabric_register_nb)
STUB(PMIx_Fabric_update)
STUB(PMIx_Fabric_update_nb)
STUB(PMIx_Get_cpuset)
STUB(PMIx_Get_credential)
STUB(PMIx_Get_credential_nb)
STUB(PMIx_Get_relative_locality)
STUB(PMIx_IOF_deregister)
STUB(PMIx_IOF_pull)
STUB(PMIx_IOF_push)
STUB(PMIx_Parse_cpuset_string)
STUB(PMIx_Process_monitor)
STUB(PMIx_Process_monitor_nb)
STUB(PMIx_Register_attributes)
STUB(PMIx_Validate_credential)
STUB(PMIx_Validate_credential_nb)
STUB(PMIx_generate_ppn)
STUB(PMIx_generate_regex)
STUB(PMIx_server_IOF_deliver)
STUB(PMIx_server_collect_inventory)
STUB(PMIx_server_define_process_set)
STUB(PMIx_server_delete_process_set)
STUB(PMIx_server_deliver_inventory)
STUB(PMIx_server_deregister_client)
STUB(PMIx_server_deregister_nspace)
STUB(PMIx_server_deregister_resources)
STUB(PMIx_server_dmodex_request)
STUB(PMIx_server_finalize)
STUB(PMIx_server_generate_cpuset_string)
STUB(PMIx_server_generate_locality_string)
STUB(PMIx_server_init)
STUB(PMIx_server_register_client)
STUB(PMIx_server_register_nspace)
STUB(PMIx_server_register_resources)
STUB(PMIx_server_setup_application)
STUB(PMIx_server_setup_fork)
STUB(PMIx_server_setup_local_support)
STUB(PMIx_tool_attach_to_server)
STUB(PMIx_tool_connect_to_server)
STUB(PMIx_tool_disconnect)
STUB(PMIx_tool_finalize)
STUB(PMIx_tool_get_servers)
STUB(PMIx_tool_init)
STUB(PMIx_tool_set_server)

__attribute__((visibility("default"))) bool PMIx_Data_compress(void) { return false; }
__attribute__((visibility("default"))) bool PMIx_Data_decompress(void) { return false; }
