package search_test

// The search quality test set, written before the ranking was tuned: each
// query is phrased as a user (or a model acting for one) would ask, and
// names the one skill that should come first. Hard cases are on purpose:
// typos, prefixes, hyphenated names, and, in the generated corpus, many
// near neighbours (the same technology and subject with another task).

// qualityQuery is one query and the name of the skill it wants first.
type qualityQuery struct {
	query string
	want  string
}

// exampleQueries run against the example skills in examples/skills.
var exampleQueries = []qualityQuery{
	{"how do I write a commit message", "commit-message"},
	{"review my go code", "go-code-review"},
	{"webhook secret rotation", "skillreg-github-webhook"},
	{"postmortem template", "incident-response"},
	{"postgres lock timeout migration", "postgres-migration-review"},
	{"comit mesage", "commit-message"},
	{"gocodereview", "go-code-review"},
	{"code-review golang", "go-code-review"},
	{"keep a changelog", "changelog"},
	{"bump the version and tag a release", "release-engineering"},
	{"is this change major, minor or patch", "release-engineering"},
	{"connect claude code to an mcp server", "mcp-client-setup"},
	{"cursor mcp configuration", "mcp-client-setup"},
	{"sev1 outage, we are paged", "incident-response"},
	{"strict yaml frontmatter rules for SKILL.md", "skill-authoring"},
	{"why was my skill excluded from the catalog", "skill-authoring"},
	{"github webhook deliveries fail with 401", "skillreg-github-webhook"},
	{"add a not null column without locking the table", "postgres-migration-review"},
	{"data races and goroutine leaks in a pull request", "go-code-review"},
	{"Co-authored-by trailer", "commit-message"},
	{"blameless postmortem", "incident-response"},
	{"changelog entry for a bug fix", "changelog"},
	{"postm", "incident-response"},
	{"relese engineering", "release-engineering"},
	{"signed test delivery script", "skillreg-github-webhook"},
}

// The generated corpus the corpusQueries target:
// corpus.Realistic(corpus.RealisticOptions{Skills: qualityCorpusSkills, Seed: qualityCorpusSeed}).
const (
	qualityCorpusSkills = 3000
	qualityCorpusSeed   = 42
)

// corpusQueries run against the generated corpus.
var corpusQueries = []qualityQuery{
	{"troubleshoot kafka topic retention", "kafka-topic-retention-troubleshooting"},
	{"alert when kafka consumers lag behind", "alert-on-kafka-consumer-lag"},
	{"dashboard to monitor postgres replication lag", "postgres-replication-lag-monitoring"},
	{"tune slow postgres query plans", "tune-postgres-query-plans"},
	{"paged for redis sentinel failover", "redis-sentinel-failover-runbook"},
	{"redis hot keys performance tuning", "redis-hot-keys-performance-tuning"},
	{"review a pull request for kubernetes crash loops", "kubernetes-crash-loops-code-review"},
	{"kubernetes network policies not working", "kubernetes-network-policies-troubleshooting"},
	{"debug a stuck terraform state lock", "debug-terraform-state-locking"},
	{"troubleshoot terraform resource imports", "terraform-resource-imports-troubleshooting"},
	{"fix goroutine leaks in go", "golang-goroutine-leaks-troubleshooting"},
	{"learn table driven tests in go", "learn-golang-table-driven-tests"},
	{"review react hooks rules in a pull request", "react-hooks-rules-code-review"},
	{"cut the cost of react rendering performance", "reduce-cost-of-react-rendering-performance"},
	{"write tests for stripe webhooks", "stripe-webhook-handling-testing"},
	{"troubleshoot stripe subscription billing", "stripe-subscription-billing-troubleshooting"},
	{"on-call runbook for tls certificate renewal", "tls-certificate-renewal-runbook"},
	{"local setup for tls mutual authentication", "tls-mutual-authentication-local-setup"},
	{"vault unseal keys troubleshooting", "vault-unseal-keys-troubleshooting"},
	{"onboarding guide for vault dynamic database credentials", "vault-dynamic-database-credentials-onboarding"},
	{"tune prometheus high cardinality metrics", "tune-prometheus-high-cardinality"},
	{"upgrading prometheus remote write", "prometheus-remote-write-upgrade"},
	{"harden self-hosted runners for github actions", "github-actions-self-hosted-runners-hardening"},
	{"migrate github actions matrix builds", "github-actions-matrix-builds-migration"},
	{"teach newcomers to bisect regressions with git", "git-bisecting-regressions-onboarding"},
	{"docker image size best practices", "docker-image-size-best-practices"},
	{"pytorch gpu memory errors troubleshooting", "pytorch-gpu-memory-troubleshooting"},
	{"configure distributed training in pytorch", "pytorch-distributed-training-configuration"},
	{"test airflow dag scheduling", "airflow-dag-scheduling-testing"},
	{"review oauth pkce code", "oauth-pkce-code-review"},
	{"troubleshoot openid connect", "oauth-openid-connect-troubleshooting"},
	{"alerting on nginx rate limiting", "nginx-rate-limiting-alerting"},
	{"debug s3 presigned url errors", "aws-s3-presigned-urls-debugging"},
	{"celery tasks too slow in django", "django-celery-tasks-performance-tuning"},
	{"django database migrations in the ci pipeline", "django-database-migrations-ci-pipeline"},
	{"swift async await concurrency troubleshooting", "swift-async-await-concurrency-troubleshooting"},
	{"mongodb change streams code review", "mongodb-change-streams-code-review"},
	{"nats jetstream streams monitoring", "nats-jetstream-streams-monitoring"},
	// typos
	{"kuberentes persistent volumes migraton", "kubernetes-persistent-volumes-migration"},
	{"terrafrom drift detecton runbok", "terraform-drift-detection-runbook"},
	{"cassandra tombstone monitorng", "cassandra-tombstones-monitoring"},
	{"elasticsearh shard allocation performance", "elasticsearch-shard-allocation-performance-tuning"},
	// prefixes
	{"dbt increm troubleshoot", "dbt-incremental-models-troubleshooting"},
	{"graphql datalo runbook", "graphql-dataloader-batching-runbook"},
	{"android anr testing", "android-anr-reports-testing"},
	{"sqs visib timeout alerting", "sqs-visibility-timeout-alerting"},
	{"jwt key rot migration", "jwt-key-rotation-migration"},
}
