// Package testenv starts the real services tenure's tests run against: an
// embedded etcd server, the test PostgreSQL server, and tenure's own
// coordinator, in-process on loopback ports.
//
// It is for tests only: production code must not import it. Each service
// has two entry points, one for TestMain, which has no *testing.T and stops
// what it started itself ([StartEtcd], [Postgres]), and one for a single
// test, which fails or skips the test and cleans up when it ends
// ([EtcdForTest], [PostgresForTest], [StartTenure]).
package testenv
