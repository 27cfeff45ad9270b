// Package query answers PMIx_Query_info: a Service holds, for each query
// key (PMIX_QUERY_NAMESPACES, PMIX_JOB_SIZE, PMIX_QUERY_PROC_TABLE,
// …), the function that answers it, which the capability that knows
// registers (the agent its jobs, the launch service its process tables,
// the groups service its process sets: Service.Handle is the hook), and
// applies OpenPMIx's rule to a request of several queries: every key
// answered is success, some of them PMIX_QUERY_PARTIAL_SUCCESS with the
// answers, none PMIX_ERR_NOT_FOUND. A key no function answers is not
// found, as OpenPMIx answers a key its host does not support.
//
//	s := query.New()
//	s.Handle(pmix.KeyQueryNamespaces, func(ctx context.Context, caller pmix.Proc, key string, qual []pmix.Info) (pmix.Value, error) {
//		return pmix.String("job1,job2"), nil
//	})
//	answers, err := s.Answer(ctx, caller, []query.Query{{Keys: []string{pmix.KeyQueryNamespaces}}})
//
// A Service is safe for concurrent use; Handle may be called while
// queries are answered.
package query
