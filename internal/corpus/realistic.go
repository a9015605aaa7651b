package corpus

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
)

// RealisticOptions describes a realistic corpus: skills that read like the
// ones teams write (a technology, one of its subjects, a task), so that
// search quality can be measured on text with real overlap between skills.
type RealisticOptions struct {
	// Skills is the number of skills to generate.
	Skills int
	// Seed makes the corpus deterministic (same seed, same bytes).
	Seed uint64
}

// RealisticSkill is one skill of a realistic corpus.
type RealisticSkill struct {
	// Dir is the skill directory, slash-separated, relative to the root
	// ("<category>/<name>").
	Dir  string
	Name string
	// Tech, Aspect and Task say what the skill is about, for tests that
	// target one skill ("kafka", "consumer lag", "troubleshooting").
	Tech, Aspect, Task string
	Deprecated         bool
	Files              []File // SKILL.md first
}

// Realistic returns o.Skills skills. The combinations of technology,
// subject and task are taken in an order shuffled by the seed, so a smaller
// corpus is a sample of the whole space rather than its first technologies;
// about one in thirty skills is a deprecated "-legacy" copy of another. When
// more skills are asked for than there are combinations, later rounds reuse
// them under a numbered suffix, as forks do.
func Realistic(o RealisticOptions) []RealisticSkill {
	g := realisticVocabulary()
	type combo struct{ tech, aspect, task int }
	var combos []combo
	for ti, t := range g.techs {
		for ai := -1; ai < len(t.aspects); ai++ {
			for ki := range g.tasks {
				combos = append(combos, combo{ti, ai, ki})
			}
		}
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x5ca1ab1e))
	r.Shuffle(len(combos), func(i, j int) { combos[i], combos[j] = combos[j], combos[i] })

	out := make([]RealisticSkill, 0, o.Skills)
	seen := make(map[string]bool, o.Skills)
	for i := 0; len(out) < o.Skills; i++ {
		c := combos[i%len(combos)]
		round := i / len(combos)
		sr := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		s := g.skill(sr, g.techs[c.tech], c.aspect, g.tasks[c.task], round)
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		out = append(out, s)
		// A deprecated copy, under its own name, now and then: search must
		// hide it unless asked, and never rank it above the live skill.
		if len(out) < o.Skills && sr.IntN(30) == 0 {
			d := g.legacy(sr, s)
			if !seen[d.Name] {
				seen[d.Name] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// RealisticFS returns the corpus as an in-memory file system, ready for
// skill.FSTree.
func RealisticFS(o RealisticOptions) fs.FS { return SkillsFS(Realistic(o)) }

// SkillsFS returns skills as an in-memory file system, ready for
// skill.FSTree.
func SkillsFS(skills []RealisticSkill) fs.FS {
	files := map[string][]byte{}
	for _, s := range skills {
		for _, f := range s.Files {
			files[s.Dir+"/"+f.Path] = f.Data
		}
	}
	return newMemFS(files)
}

type tech struct {
	slug, display, category string
	aspects                 []string
	related                 []string
	commands                []string
}

type task struct {
	slug, verb, tag string
	// summary and detail are description sentences; intro opens the body;
	// triggers, steps and pitfalls fill its sections. {T} is the
	// technology, {A} the subject, {R} a related tool.
	summary, detail, intro []string
	triggers, steps        []string
	pitfalls               []string
}

type vocabulary struct {
	techs   []tech
	tasks   []task
	generic []string
	teams   []string
}

func (g *vocabulary) skill(r *rand.Rand, t tech, aspect int, k task, round int) RealisticSkill {
	a, aslug := "", ""
	if aspect >= 0 {
		a = t.aspects[aspect]
		aslug = slug(a)
	}
	var parts []string
	if r.IntN(5) == 0 {
		parts = []string{slug(k.verb), t.slug, aslug}
	} else {
		parts = []string{t.slug, aslug, k.slug}
	}
	if round > 0 {
		parts = append(parts, fmt.Sprint(round+1))
	}
	name := joinName(parts)
	subject := t.display
	if a != "" {
		subject = t.display + " " + a
	}
	fill := func(s string) string {
		rel := t.display
		if len(t.related) > 0 {
			rel = t.related[r.IntN(len(t.related))]
		}
		aa := a
		if aa == "" {
			aa = t.category
		}
		return expand(s, t.display, aa, subject, rel)
	}
	pick := func(list []string) string { return fill(list[r.IntN(len(list))]) }

	desc := pick(k.summary) + " " + pick(k.detail) + " Use when " + pick(k.triggers) + "."
	tags := []string{t.category, t.slug, k.tag}
	if len(t.related) > 0 && r.IntN(2) == 0 {
		tags = append(tags, t.related[r.IntN(len(t.related))])
	}
	team := g.teams[r.IntN(len(g.teams))]

	var b strings.Builder
	fmt.Fprintf(&b, "---\nname: %s\ndescription: %s\nlicense: Apache-2.0\ntags: [%s]\nmetadata:\n  author: %s\n  version: \"%d.%d.0\"\n---\n\n",
		name, yamlString(desc), strings.Join(tags, ", "), yamlString(team), 1+r.IntN(3), r.IntN(10))
	fmt.Fprintf(&b, "# %s\n\n%s %s\n\n", title(k, subject), pick(k.intro), fill(g.generic[r.IntN(len(g.generic))]))
	b.WriteString("## When to use\n\n")
	for _, i := range r.Perm(len(k.triggers))[:2] {
		fmt.Fprintf(&b, "- %s\n", capitalise(fill(k.triggers[i])))
	}
	b.WriteString("\n## Steps\n\n")
	n := 0
	for _, i := range r.Perm(len(k.steps))[:4+r.IntN(min(3, len(k.steps)-3))] {
		n++
		fmt.Fprintf(&b, "%d. %s\n", n, fill(k.steps[i]))
		if r.IntN(3) == 0 {
			n++
			fmt.Fprintf(&b, "%d. %s\n", n, fill(g.generic[r.IntN(len(g.generic))]))
		}
	}
	if len(t.commands) > 0 {
		b.WriteString("\n## Commands\n\n```sh\n")
		for _, c := range t.commands {
			b.WriteString(c + "\n")
		}
		b.WriteString("```\n")
	}
	b.WriteString("\n## Background\n\n")
	for j, i := range r.Perm(len(backgroundSentences))[:3+r.IntN(3)] {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fill(backgroundSentences[i]))
	}
	b.WriteString("\n\n## Checklist\n\n")
	for _, i := range r.Perm(len(k.steps))[:3] {
		fmt.Fprintf(&b, "- [ ] %s\n", fill(k.steps[i]))
	}
	b.WriteString("\n## Pitfalls\n\n")
	for _, i := range r.Perm(len(k.pitfalls))[:2] {
		fmt.Fprintf(&b, "- %s\n", capitalise(fill(k.pitfalls[i])))
	}
	other := g.techs[r.IntN(len(g.techs))]
	fmt.Fprintf(&b, "\n## Related\n\nTeams running %s next to %s often pair this skill with the %s skills.\n", t.display, other.display, other.display)

	ref := fmt.Sprintf("# Notes on %s\n\n%s\n\n%s\n", subject, fill(k.steps[r.IntN(len(k.steps))]), fill(g.generic[r.IntN(len(g.generic))]))
	return RealisticSkill{
		Dir: t.category + "/" + name, Name: name, Tech: t.slug, Aspect: a, Task: k.slug,
		Files: []File{{Path: "SKILL.md", Data: []byte(b.String())}, {Path: "references/notes.md", Data: []byte(ref)}},
	}
}

// legacy is a deprecated copy of s under another name.
func (g *vocabulary) legacy(r *rand.Rand, s RealisticSkill) RealisticSkill {
	d := s
	d.Name = joinName([]string{s.Name, "legacy"})
	d.Dir = s.Dir[:strings.IndexByte(s.Dir, '/')+1] + d.Name
	d.Deprecated = true
	md := string(s.Files[0].Data)
	md = strings.Replace(md, "name: "+s.Name+"\n", "name: "+d.Name+"\ndeprecated: true\n", 1)
	md = strings.Replace(md, "description: \"", "description: \"Deprecated, use "+s.Name+" instead. ", 1)
	d.Files = []File{{Path: "SKILL.md", Data: []byte(md)}, s.Files[1]}
	return d
}

// expand fills a template's {T}, {A}, {S} and {R}.
func expand(s, tech, aspect, subject, related string) string {
	var b strings.Builder
	b.Grow(len(s) + 32)
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 || i+2 >= len(s) || s[i+2] != '}' {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case 'T':
			b.WriteString(tech)
		case 'A':
			b.WriteString(aspect)
		case 'S':
			b.WriteString(subject)
		case 'R':
			b.WriteString(related)
		default:
			b.WriteString(s[i : i+3])
		}
		s = s[i+3:]
	}
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// joinName joins slug parts into a valid skill name of at most 64
// characters.
func joinName(parts []string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	n := strings.Join(keep, "-")
	for len(n) > 64 {
		n = strings.TrimRight(n[:64], "-")
	}
	return n
}

func yamlString(s string) string {
	b, _ := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
	return string(b)
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func title(k task, subject string) string {
	return capitalise(k.verb) + " " + subject
}

func realisticVocabulary() *vocabulary {
	g := &vocabulary{
		teams: []string{"platform-team", "data-engineering", "sre", "security", "frontend-guild", "mobile", "developer-experience", "payments", "ml-platform", "infrastructure"},
	}
	for _, line := range strings.Split(strings.TrimSpace(techTable), "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 6) // commands may hold a pipe
		if len(f) != 6 {
			panic("corpus: bad tech line: " + line)
		}
		g.techs = append(g.techs, tech{
			slug: f[0], display: f[1], category: f[2],
			aspects: splitList(f[3], ","), related: splitList(f[4], ","), commands: splitList(f[5], ";"),
		})
	}
	g.tasks = realisticTasks
	g.generic = genericSentences
	return g
}

func splitList(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}

// techTable: slug|display|category|subjects|related tools|commands.
const techTable = `
kafka|Apache Kafka|messaging|consumer lag,partition rebalancing,topic retention,broker replication,schema registry,exactly-once delivery|zookeeper,kraft,kafka connect|kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group orders;kafka-topics.sh --bootstrap-server localhost:9092 --describe --topic events
rabbitmq|RabbitMQ|messaging|queue backlog,dead letter exchanges,cluster partitions,publisher confirms,shovel federation|amqp,erlang|rabbitmqctl list_queues name messages consumers;rabbitmq-diagnostics status
nats|NATS|messaging|jetstream streams,subject permissions,leaf nodes,consumer acknowledgements|jetstream|nats stream info ORDERS;nats server report jetstream
sqs|Amazon SQS|messaging|visibility timeout,dead letter queues,fifo ordering,long polling|sns,aws lambda|aws sqs get-queue-attributes --queue-url "$QUEUE_URL" --attribute-names All
pubsub|Google Pub/Sub|messaging|subscription backlog,ordering keys,push endpoints,dead lettering|gcp|gcloud pubsub subscriptions describe orders-sub
postgres|PostgreSQL|databases|vacuum bloat,replication lag,connection pooling,query plans,partitioned tables,logical replication|pgbouncer,psql|psql -c 'SELECT pid, state, query FROM pg_stat_activity';psql -c 'EXPLAIN (ANALYZE, BUFFERS) SELECT 1'
mysql|MySQL|databases|slow query log,replica lag,innodb buffer pool,online schema changes,deadlocks|gh-ost,percona toolkit|mysqladmin processlist;pt-query-digest slow.log
redis|Redis|databases|memory eviction,cluster resharding,persistence snapshots,hot keys,sentinel failover|valkey|redis-cli --bigkeys;redis-cli INFO memory
mongodb|MongoDB|databases|replica sets,sharding keys,index builds,aggregation pipelines,change streams|mongosh|mongosh --eval 'db.currentOp()';mongodump --archive=backup.gz --gzip
elasticsearch|Elasticsearch|search|index mappings,shard allocation,cluster health,query relevance,snapshot lifecycle|kibana,opensearch|curl -s 'localhost:9200/_cluster/health?pretty';curl -s 'localhost:9200/_cat/shards?v'
cassandra|Apache Cassandra|databases|compaction strategies,tombstones,repair scheduling,consistency levels|nodetool|nodetool status;nodetool compactionstats
sqlite|SQLite|databases|write-ahead logging,database locking,schema migrations,full text search|fts5|sqlite3 app.db 'PRAGMA journal_mode=WAL;'
clickhouse|ClickHouse|analytics|merge tree engines,materialized views,distributed tables,query profiling|olap|clickhouse-client --query 'SELECT * FROM system.merges'
dynamodb|Amazon DynamoDB|databases|partition keys,global secondary indexes,capacity modes,streams and triggers,single table design|aws|aws dynamodb describe-table --table-name orders
snowflake|Snowflake|analytics|warehouse sizing,query history,data sharing,access roles,time travel|sql|snowsql -q 'SHOW WAREHOUSES'
bigquery|Google BigQuery|analytics|slot usage,partitioned tables,query costs,scheduled queries|gcp,sql|bq query --dry_run --use_legacy_sql=false 'SELECT 1'
kubernetes|Kubernetes|infrastructure|pod scheduling,crash loops,resource limits,horizontal autoscaling,network policies,rbac permissions,persistent volumes|kubectl,helm|kubectl get pods -A --field-selector=status.phase!=Running;kubectl describe pod "$POD"
helm|Helm|infrastructure|chart values,release rollbacks,chart dependencies,chart testing|kubernetes|helm diff upgrade app ./chart;helm history app
terraform|Terraform|infrastructure|state locking,module versioning,drift detection,provider upgrades,remote backends,resource imports|hcl,opentofu|terraform plan -out=tfplan;terraform state list
ansible|Ansible|infrastructure|inventory management,playbook idempotence,vault secrets,role structure|yaml,ssh|ansible-playbook site.yml --check --diff;ansible-inventory --graph
docker|Docker|containers|image size,multi-stage builds,build cache,container networking,healthchecks|dockerfile,buildkit|docker build --progress=plain .;docker image history app:latest
nginx|NGINX|networking|reverse proxy,rate limiting,tls termination,caching headers,upstream timeouts|http|nginx -t;nginx -s reload
envoy|Envoy Proxy|networking|circuit breaking,retry policies,listener filters,access logs|xds,service mesh|curl -s localhost:9901/clusters
istio|Istio|networking|mutual tls,traffic shifting,sidecar injection,authorization policies|envoy,kubernetes|istioctl analyze;istioctl proxy-status
consul|HashiCorp Consul|networking|service discovery,health checks,key value store,acl tokens|service mesh|consul members;consul catalog services
vault|HashiCorp Vault|security|secret engines,dynamic database credentials,unseal keys,policy authoring,token leases|secrets|vault status;vault policy read app
cloudflare|Cloudflare|networking|dns records,waf rules,workers deployment,cache purging|cdn|wrangler deploy;curl -sI https://example.com
dns|DNS|networking|record propagation,dnssec signing,split horizon,ttl planning|bind,route53|dig +trace example.com;dig example.com TXT
tls|TLS certificates|security|certificate renewal,certificate chains,cipher suites,mutual authentication|openssl,letsencrypt,cert-manager|openssl s_client -connect example.com:443 -servername example.com;openssl x509 -noout -dates -in cert.pem
linux|Linux servers|operating-systems|disk space,memory pressure,systemd services,kernel parameters,file descriptors|bash,systemd|df -h;journalctl -u app --since '1 hour ago'
aws-iam|AWS IAM|cloud|least privilege policies,role assumption,access key rotation,permission boundaries|aws,sts|aws sts get-caller-identity;aws iam list-attached-role-policies --role-name app
aws-s3|Amazon S3|cloud|bucket policies,lifecycle rules,cross region replication,presigned urls,storage classes|aws|aws s3api get-bucket-policy --bucket assets;aws s3 ls s3://assets --recursive --summarize
aws-lambda|AWS Lambda|cloud|cold starts,concurrency limits,layers packaging,event source mappings|serverless,aws|aws lambda get-function-configuration --function-name api
gke|Google Kubernetes Engine|cloud|node pools,workload identity,cluster upgrades,autopilot clusters|gcp,kubernetes|gcloud container clusters describe prod
azure-functions|Azure Functions|cloud|durable functions,app settings,deployment slots,trigger bindings|azure|az functionapp list
prometheus|Prometheus|observability|alerting rules,recording rules,high cardinality,remote write,scrape configs|promql,alertmanager|promtool check rules rules.yml;curl -s localhost:9090/api/v1/targets
grafana|Grafana|observability|dashboard design,alert notifications,data sources,provisioning as code|prometheus,loki|grafana-cli plugins ls
opentelemetry|OpenTelemetry|observability|trace context propagation,collector pipelines,sampling strategies,span attributes|otel,jaeger|otelcol validate --config collector.yaml
loki|Grafana Loki|observability|log labels,logql queries,retention policies,ingestion limits|promtail|logcli query '{app="api"} |= "error"'
datadog|Datadog|observability|monitors and alerts,apm traces,log pipelines,custom metrics|dogstatsd|datadog-agent status
sentry|Sentry|observability|error grouping,release tracking,source maps,alert rules|crash reporting|sentry-cli releases new "$VERSION"
pagerduty|PagerDuty|operations|escalation policies,on-call schedules,alert routing,incident workflows|on-call|pd incident list
github-actions|GitHub Actions|ci-cd|workflow caching,matrix builds,reusable workflows,secrets handling,self-hosted runners|yaml|gh run list;gh run view --log-failed
gitlab-ci|GitLab CI|ci-cd|pipeline stages,runner configuration,merge request pipelines,artifacts and caches|yaml|gitlab-runner verify
jenkins|Jenkins|ci-cd|declarative pipelines,agent labels,shared libraries,plugin updates|groovy|java -jar jenkins-cli.jar list-jobs
argocd|Argo CD|ci-cd|application sync,sync waves,drift reconciliation,multi cluster deployment|gitops,kubernetes|argocd app diff api;argocd app sync api
bazel|Bazel|build-systems|remote caching,build rules,dependency management,hermetic toolchains|starlark|bazel build //...;bazel query 'deps(//app)'
gradle|Gradle|build-systems|build cache,dependency locking,multi project builds,kotlin dsl|jvm|./gradlew build --scan;./gradlew dependencies
git|Git|version-control|merge conflicts,interactive rebase,large files,branch protection,bisecting regressions,submodules|github|git rebase -i origin/main;git bisect start
golang|Go|languages|goroutine leaks,error wrapping,module versioning,profiling with pprof,table driven tests,generics|go modules|go test -race ./...;go tool pprof cpu.out
rust|Rust|languages|borrow checker errors,async runtimes,unsafe code,cargo workspaces,error handling|cargo,tokio|cargo clippy -- -D warnings;cargo test
python|Python|languages|virtual environments,type hints,pyproject packaging,asyncio,dependency pinning|pip,uv|python -m venv .venv;python -m pytest -x
django|Django|web-frameworks|orm query optimization,database migrations,admin customization,middleware,celery tasks|python|python manage.py showmigrations;python manage.py check --deploy
fastapi|FastAPI|web-frameworks|dependency injection,pydantic models,background tasks,openapi schema|python,uvicorn|uvicorn app.main:app --reload
flask|Flask|web-frameworks|blueprints,application factory,session handling,request context|python|flask routes
rails|Ruby on Rails|web-frameworks|active record queries,n+1 queries,background jobs,asset pipeline|ruby,sidekiq|bin/rails db:migrate:status;bundle exec rspec
laravel|Laravel|web-frameworks|eloquent relationships,queues and horizon,blade components,artisan commands|php|php artisan migrate:status
spring-boot|Spring Boot|web-frameworks|actuator endpoints,bean configuration,jpa repositories,security filters|java,maven|./mvnw spring-boot:run
nodejs|Node.js|languages|event loop blocking,memory leaks,npm dependencies,esm modules,worker threads|npm,javascript|node --inspect server.js;npm audit
typescript|TypeScript|languages|strict mode,type narrowing,declaration files,project references|tsc|npx tsc --noEmit
react|React|frontend|component state,rendering performance,hooks rules,server components,accessibility|jsx|npm run build;npx eslint src
vue|Vue.js|frontend|composition api,pinia stores,reactivity pitfalls,single file components|javascript|npm run dev
angular|Angular|frontend|change detection,rxjs subscriptions,standalone components,lazy loading|typescript|ng build --configuration production
nextjs|Next.js|frontend|app router,static generation,edge middleware,image optimization|react,vercel|next build;next lint
css|CSS|frontend|flexbox layouts,grid layouts,responsive design,dark mode,design tokens|sass,tailwind|npx stylelint '**/*.css'
webpack|Webpack|frontend|bundle size,code splitting,loader configuration,source maps|javascript|npx webpack --profile --json > stats.json
java|Java|languages|garbage collection tuning,thread dumps,heap dumps,jvm flags|jvm|jcmd "$PID" Thread.print;jstat -gcutil "$PID" 1000
kotlin|Kotlin|languages|coroutines,null safety,gradle kotlin scripts,multiplatform modules|jvm|./gradlew ktlintCheck
swift|Swift|mobile|swiftui views,async await concurrency,app store submission,core data|ios,xcode|xcodebuild test -scheme App
android|Android|mobile|jetpack compose,gradle build times,play store release,anr reports|kotlin|./gradlew assembleRelease
flutter|Flutter|mobile|widget rebuilds,state management,platform channels|dart|flutter analyze
cpp|C++|languages|memory safety,cmake builds,undefined behavior,sanitizers|cmake,clang|cmake -B build -DCMAKE_BUILD_TYPE=Debug
dotnet|.NET|languages|entity framework,dependency injection,async deadlocks,nuget packages|csharp|dotnet test;dotnet-counters monitor -p "$PID"
airflow|Apache Airflow|data-engineering|dag scheduling,task retries,sensors,backfills|python|airflow dags list-import-errors;airflow tasks test etl extract 2026-01-01
spark|Apache Spark|data-engineering|shuffle partitions,skewed joins,memory spills,structured streaming|pyspark,scala|spark-submit --conf spark.sql.shuffle.partitions=400 job.py
dbt|dbt|data-engineering|incremental models,data tests,source freshness,macros|sql|dbt build --select state:modified+;dbt source freshness
pandas|pandas|data-science|dataframe memory,groupby aggregations,time series resampling,merging dataframes|python,numpy|python -c 'import pandas; pandas.show_versions()'
pytorch|PyTorch|machine-learning|gpu memory,training loops,mixed precision,distributed training,model checkpoints|cuda|torchrun --nproc_per_node=4 train.py
jupyter|Jupyter notebooks|data-science|kernel management,notebook reproducibility,interactive widgets|python|jupyter nbconvert --execute report.ipynb
llm|LLM applications|machine-learning|prompt templates,retrieval augmented generation,evaluation datasets,token costs,guardrails|embeddings|python eval.py --dataset golden.jsonl
graphql|GraphQL|apis|schema design,resolver performance,dataloader batching,persisted queries|apollo|npx graphql-inspector diff old.graphql new.graphql
grpc|gRPC|apis|protobuf schema evolution,deadlines,streaming rpcs,load balancing|protobuf|grpcurl -plaintext localhost:50051 list;buf breaking --against '.git#branch=main'
openapi|OpenAPI|apis|spec linting,client generation,breaking change detection,api versioning|swagger,rest|npx @redocly/cli lint openapi.yaml
oauth|OAuth 2.0|security|authorization code flow,pkce,token refresh,scope design,openid connect|jwt,oidc|curl -s https://issuer.example.com/.well-known/openid-configuration
jwt|JSON Web Tokens|security|signature validation,key rotation,claims validation,token expiry|jwks|step crypto jwt inspect --insecure < token.txt
stripe|Stripe payments|payments|webhook handling,subscription billing,refunds and disputes,idempotency keys|payments api|stripe listen --forward-to localhost:3000/webhooks
slack|Slack apps|integrations|slash commands,event subscriptions,bot permissions,interactive messages|bolt|slack run
websec|Web application security|security|sql injection,cross site scripting,csrf protection,dependency vulnerabilities,security headers|owasp|semgrep --config auto;npm audit --production
`

var realisticTasks = []task{
	{
		slug: "troubleshooting", verb: "troubleshoot", tag: "troubleshooting",
		summary:  []string{"Diagnose and fix {A} problems in {T}.", "Troubleshoot {S} issues step by step, from symptom to root cause.", "Find out why {S} misbehaves and fix it safely."},
		detail:   []string{"Covers gathering symptoms, reading logs and metrics, checking {R}, and applying a reversible fix.", "Walks through the usual causes, the commands that confirm each one, and how to verify the fix."},
		intro:    []string{"Most {A} problems in {T} have a handful of causes; check them in order of likelihood.", "Start from the symptom users see and work back to the cause before changing anything."},
		triggers: []string{"{S} is failing or slow", "alerts fire for {A} in {T}", "users report errors that point at {T}", "a deploy made {A} worse"},
		steps:    []string{"Write down the exact symptom, when it started and what changed around that time.", "Collect logs and metrics for {A} from the affected {T} instances.", "Compare the current {T} configuration with the last known good one.", "Check whether {R} is involved before blaming {T} itself.", "Reproduce the problem in staging with the same {T} version.", "Apply the smallest reversible fix and confirm the symptom is gone.", "Record the root cause and the fix so the next on-call engineer finds it."},
		pitfalls: []string{"restarting {T} hides the evidence; capture state first", "fixing the symptom without the root cause brings the {A} problem back", "assuming the latest change is the culprit without checking"},
	},
	{
		slug: "performance-tuning", verb: "tune", tag: "performance",
		summary:  []string{"Tune {S} for throughput and latency.", "Make {T} faster by measuring {A} and removing bottlenecks.", "Improve {T} performance around {A} with measured, reversible changes."},
		detail:   []string{"Covers baselines, profiling, the settings that matter most, and load testing the change.", "Explains which knobs affect {A}, how to benchmark them, and how to roll changes out gradually."},
		intro:    []string{"Performance work starts with a baseline: never tune {T} without numbers from before and after.", "Measure where time goes in {T} before touching a single setting."},
		triggers: []string{"{S} is too slow", "latency or throughput of {T} misses its target", "you need to squeeze more out of {T} before scaling out", "a benchmark of {A} regressed"},
		steps:    []string{"Capture a baseline of latency percentiles and throughput for {A}.", "Profile {T} under realistic load to find the real bottleneck.", "Change one setting at a time and rerun the same benchmark.", "Check that {R} is not the limiting factor.", "Roll the tuned {T} configuration out to one instance first.", "Keep the benchmark script next to the configuration so results can be reproduced."},
		pitfalls: []string{"tuning from blog-post defaults without measuring your own {A} workload", "benchmarks on an idle laptop say little about production {T}", "changing several settings at once makes results impossible to attribute"},
	},
	{
		slug: "upgrade", verb: "upgrade", tag: "upgrades",
		summary:  []string{"Plan and run a {T} version upgrade with attention to {A}.", "Upgrade {T} to a new major or minor version without downtime.", "Safely upgrade {S} across environments."},
		detail:   []string{"Covers release notes, deprecated features, compatibility of {R}, a staged rollout and the rollback plan.", "Lists the checks before, during and after the upgrade, and how to roll back."},
		intro:    []string{"An upgrade is a deploy with more unknowns: read the release notes for every version you skip.", "Upgrade {T} one environment at a time and keep the old version one command away."},
		triggers: []string{"{T} reaches end of life", "a new {T} version fixes a bug in {A}", "a security advisory requires upgrading {T}", "planning the yearly {T} upgrade"},
		steps:    []string{"Read the release notes for every {T} version between the current and the target one.", "List deprecated and removed features and search the code for their use.", "Check that {R} supports the target {T} version.", "Upgrade staging first and run the full test suite.", "Upgrade production in a maintenance window with the rollback command ready.", "Watch error rates and {A} metrics for a day before closing the upgrade."},
		pitfalls: []string{"skipping several major versions at once", "forgetting that client libraries must support the new {T} version too", "no tested rollback path"},
	},
	{
		slug: "migration", verb: "migrate", tag: "migration",
		summary:  []string{"Migrate {S} to a new setup without losing data.", "Plan a migration of {A} in {T} with a dual-run period and a cutover.", "Move workloads onto {T} and migrate {A} safely."},
		detail:   []string{"Covers inventory, a compatibility check, dual writes or replication, the cutover and the cleanup.", "Explains how to migrate in small steps, verify each one, and keep a way back."},
		intro:    []string{"A migration is done when the old system is switched off, not when the new one starts.", "Migrate {A} in reversible steps, each one verified before the next."},
		triggers: []string{"moving {A} to {T}", "replacing {R} with {T}", "consolidating several {T} setups into one", "a migration of {A} stalled halfway"},
		steps:    []string{"Inventory everything that uses {A} today, including scripts and cron jobs.", "Set up {T} next to the old system and copy a sample of real data.", "Run both in parallel and compare results for {A}.", "Cut over traffic gradually, starting with internal users.", "Keep the old system read-only for a while before deleting it.", "Update runbooks and dashboards to point at {T}."},
		pitfalls: []string{"a big-bang cutover with no way back", "forgetting consumers of {A} that nobody documented", "declaring victory while the old system still takes writes"},
	},
	{
		slug: "monitoring", verb: "monitor", tag: "monitoring",
		summary:  []string{"Monitor {S} with useful metrics, dashboards and alerts.", "Set up monitoring for {T} focused on {A}.", "Decide what to measure about {A} in {T} and alert only on what matters."},
		detail:   []string{"Covers the key metrics, exporters, dashboard panels, alert thresholds and runbook links.", "Explains the golden signals for {T}, how to collect them with {R}, and which alerts page a human."},
		intro:    []string{"Good monitoring answers one question fast: is {T} serving users well right now?", "Alert on symptoms users feel; put causes like {A} on dashboards."},
		triggers: []string{"a new {T} deployment needs metrics and alerts", "an {A} problem was noticed by users before any alert", "dashboards for {T} are noisy or missing", "setting up observability for {T}"},
		steps:    []string{"List the golden signals for {T}: latency, traffic, errors and saturation.", "Export {A} metrics with {R} and check their cardinality.", "Build one dashboard per service with the key {T} panels on top.", "Write alerts on symptoms with a clear threshold and a runbook link.", "Test each alert by triggering it in staging.", "Review alert noise monthly and delete alerts nobody acts on."},
		pitfalls: []string{"alerting on every cause instead of user-visible symptoms", "high-cardinality labels that make the metrics backend fall over", "dashboards nobody looks at during an incident"},
	},
	{
		slug: "hardening", verb: "harden", tag: "security",
		summary:  []string{"Harden {T} security around {A}.", "Lock down {S}: authentication, authorization, encryption and audit logs.", "Apply a security hardening checklist to {T}."},
		detail:   []string{"Covers least privilege, secrets handling, network exposure, patching and audit logging.", "Explains the attack surface of {A}, the secure defaults, and how to verify them."},
		intro:    []string{"Secure defaults in {T} are rarely the defaults you get; check each one.", "Hardening is a checklist you rerun, not a one-time project."},
		triggers: []string{"a security review of {T} is due", "a penetration test flagged {A}", "exposing {T} to the internet", "a compliance audit asks how {T} is secured"},
		steps:    []string{"Inventory who and what can reach {T} and with which permissions.", "Remove default credentials and rotate every secret used by {A}.", "Restrict network access to {T} to the services that need it.", "Enable encryption in transit and at rest where {T} supports it.", "Turn on audit logging and ship it to {R}.", "Schedule patching of {T} and subscribe to its security advisories."},
		pitfalls: []string{"leaving an admin endpoint of {T} open to the whole network", "secrets for {A} committed to the repository", "hardening once and never checking again"},
	},
	{
		slug: "backup-restore", verb: "back up", tag: "backup",
		summary:  []string{"Back up {S} and prove that restores work.", "Set up backups and tested restores for {T}.", "Design a backup and restore plan for {A} in {T}."},
		detail:   []string{"Covers backup schedules, retention, encryption, point-in-time recovery and restore drills.", "Explains recovery point and recovery time objectives and how to meet them with {R}."},
		intro:    []string{"A backup you have never restored is a hope, not a backup.", "Decide how much data you can lose and how long a restore may take, then design backups of {T} for that."},
		triggers: []string{"setting up backups for {T}", "a restore drill of {A} is due", "data was deleted by mistake and must be restored", "auditors ask for proof that {T} restores work"},
		steps:    []string{"Agree on the recovery point objective and recovery time objective for {T}.", "Schedule full and incremental backups and store them in another region.", "Encrypt backups and keep the keys apart from the data.", "Restore into a scratch environment every month and time it.", "Check that the restored {A} data is complete and consistent.", "Alert when a backup job fails or takes far longer than usual."},
		pitfalls: []string{"backups stored in the same account or region as {T}", "never timing a full restore of {A}", "retention that silently deletes the only good copy"},
	},
	{
		slug: "testing", verb: "test", tag: "testing",
		summary:  []string{"Write reliable tests for {S}.", "Test code that depends on {T}, with focus on {A}.", "Build a test strategy for {A} in {T}: unit, integration and end to end."},
		detail:   []string{"Covers test doubles versus real instances in containers, fixtures, flaky tests and coverage of {A}.", "Explains how to run a real {T} in tests, seed data, and keep the suite fast."},
		intro:    []string{"Tests against a real {T} catch what mocks hide; run one in a container when you can.", "A test for {A} should fail for exactly one reason and say which."},
		triggers: []string{"adding tests for code that uses {T}", "tests around {A} are flaky", "a bug in {A} escaped to production", "setting up integration tests with {T}"},
		steps:    []string{"Decide which {A} behaviour needs a unit test and which needs a real {T}.", "Start {T} in a container for integration tests and seed known data.", "Make each test independent: its own data, no shared state.", "Cover the failure paths of {A}, not only the happy path.", "Run the suite in CI on every change and keep it under ten minutes.", "Quarantine and fix flaky tests instead of retrying them forever."},
		pitfalls: []string{"mocking {T} so heavily that the test checks the mock", "tests that depend on execution order", "sleeping instead of waiting for {A} to be ready"},
	},
	{
		slug: "code-review", verb: "review", tag: "code-review",
		summary:  []string{"Review code changes that touch {S}.", "Review a pull request involving {T} and {A} for correctness and safety.", "Give actionable code review comments on {T} changes."},
		detail:   []string{"Covers correctness, error handling, {A} pitfalls, tests, naming and performance claims.", "Lists what to check in a {T} diff, how to label severity, and how to phrase comments."},
		intro:    []string{"Review for what would hurt in production first, then for what would hurt the next reader.", "A good review of a {T} change names the problem, why it matters and one fix."},
		triggers: []string{"asked to review a {T} pull request", "a change touches {A} in {T}", "checking your own {T} change before proposing it", "a reviewer needs a {T} checklist"},
		steps:    []string{"Read the description and the tests before the code.", "Check how the change handles {A} and its failure modes.", "Look for missing error handling around calls to {T}.", "Verify that new behaviour has tests that would fail without it.", "Label each comment as blocking, suggestion or nit.", "End with a summary and a clear verdict."},
		pitfalls: []string{"bikeshedding style the linter already checks", "approving a {T} change you could not build or test", "rewriting the change in your own style in comments"},
	},
	{
		slug: "local-setup", verb: "set up", tag: "developer-setup",
		summary:  []string{"Set up a local {T} development environment for {A}.", "Get {T} running on a laptop for development and debugging.", "Create a reproducible local setup of {S}."},
		detail:   []string{"Covers installation, containers, seed data, configuration files and common setup errors.", "Explains a one-command setup with containers and how to reset it."},
		intro:    []string{"A new engineer should have {T} running locally within an hour.", "Keep the local {T} setup scripted so it never drifts from the documented one."},
		triggers: []string{"onboarding onto a project that uses {T}", "the local {T} setup is broken", "you need {A} locally to reproduce a bug", "writing a docker compose file for {T}"},
		steps:    []string{"Install the {T} version pinned by the project, not the latest.", "Start {T} and {R} with one compose file.", "Load seed data that exercises {A}.", "Document the environment variables the app needs.", "Add a reset script that brings the local {T} back to a clean state.", "Check the setup on a fresh machine before calling it done."},
		pitfalls: []string{"a local {T} version different from production", "setup steps only in someone's shell history", "seed data that does not exercise {A}"},
	},
	{
		slug: "ci-pipeline", verb: "automate", tag: "ci",
		summary:  []string{"Build a CI pipeline for {S}.", "Automate builds, tests and checks for {T} projects in continuous integration.", "Speed up and stabilise the CI pipeline for {T} around {A}."},
		detail:   []string{"Covers caching, parallel jobs, required checks, artifacts and secrets in CI.", "Explains pipeline stages, caching dependencies, and keeping CI fast and green."},
		intro:    []string{"CI is the team's shared definition of done; keep it fast and trustworthy.", "Every step of the {T} pipeline should run the same locally and in CI."},
		triggers: []string{"adding CI to a {T} project", "the {T} pipeline is slow or flaky", "{A} checks should block merges", "moving {T} builds to another CI system"},
		steps:    []string{"List the checks every {T} change must pass before merge.", "Cache dependencies and build outputs keyed by their lock files.", "Run independent jobs in parallel.", "Make {A} checks required on the main branch.", "Keep secrets out of logs and give CI the least privilege it needs.", "Track pipeline duration and fix regressions quickly."},
		pitfalls: []string{"caches keyed too loosely that serve stale {T} builds", "retrying flaky jobs until green", "CI steps that differ from local commands"},
	},
	{
		slug: "cost-optimization", verb: "reduce cost of", tag: "cost",
		summary:  []string{"Reduce the cost of running {S}.", "Cut {T} spending by right-sizing and removing waste in {A}.", "Find and remove waste in the {T} bill."},
		detail:   []string{"Covers cost attribution, right-sizing, reserved capacity, retention and idle resources.", "Explains where {T} money goes, quick wins, and guardrails against regressions."},
		intro:    []string{"You cannot cut what you cannot attribute: tag every {T} resource with an owner.", "The cheapest {T} resource is the one you delete."},
		triggers: []string{"the {T} bill grew unexpectedly", "finance asks for a {T} cost breakdown", "{A} costs more than the value it brings", "planning next year's {T} budget"},
		steps:    []string{"Break {T} costs down by team, environment and {A}.", "Find idle or oversized resources and right-size them.", "Shorten retention where nobody reads the old data.", "Buy reserved or committed capacity for the steady baseline only.", "Set a budget alert per team.", "Review the {T} bill monthly with the owners."},
		pitfalls: []string{"cutting redundancy that {A} needs for reliability", "reserved capacity for workloads about to move", "no owner tags, so nobody feels the {T} bill"},
	},
	{
		slug: "runbook", verb: "respond to", tag: "runbook",
		summary:  []string{"Runbook for {S} incidents.", "Respond to on-call pages about {A} in {T}.", "Step-by-step on-call runbook for {T} failures involving {A}."},
		detail:   []string{"Covers first checks, safe mitigations, escalation, and what to record for the postmortem.", "Lists the alert meanings, the commands to run first, and when to escalate."},
		intro:    []string{"When paged, mitigate first and investigate second.", "This runbook assumes you were paged for {A}; keep the incident channel updated as you go."},
		triggers: []string{"paged for {A} in {T}", "an incident involves {T}", "on-call needs the first steps for a {T} outage", "{S} is down"},
		steps:    []string{"Acknowledge the page and post in the incident channel.", "Check the {T} dashboard for {A} and the recent deploys.", "Apply the safest mitigation: roll back, fail over or shed load.", "Escalate to the {T} owners if not mitigated within 30 minutes.", "Record every command and finding with a UTC timestamp.", "Hand over with a written status when your shift ends."},
		pitfalls: []string{"debugging for an hour before mitigating", "changing {T} without announcing it in the channel", "forgetting to record the timeline for the postmortem"},
	},
	{
		slug: "capacity-planning", verb: "plan capacity for", tag: "capacity",
		summary:  []string{"Plan capacity for {S}.", "Forecast growth and size {T} for {A} ahead of demand.", "Capacity planning for {T}: headroom, forecasts and load tests."},
		detail:   []string{"Covers growth forecasts, saturation metrics, headroom targets and load tests.", "Explains how to size {T} with data and when to scale up or out."},
		intro:    []string{"Capacity planning is forecasting plus headroom plus a test that proves the numbers.", "Size {T} for the peak you expect next quarter, not for today's average."},
		triggers: []string{"traffic to {T} will grow", "a launch will stress {A}", "{T} runs close to its limits", "planning hardware or cloud budget for {T}"},
		steps:    []string{"Collect a year of traffic and {A} saturation metrics.", "Forecast the peak for the next two quarters.", "Define a headroom target, for example 40 percent at peak.", "Load test {T} at the forecast peak plus headroom.", "Decide between scaling up and scaling out.", "Revisit the plan every quarter."},
		pitfalls: []string{"planning from averages instead of peaks", "ignoring {R} as a shared bottleneck", "load tests that do not resemble real {A} traffic"},
	},
	{
		slug: "documentation", verb: "document", tag: "documentation",
		summary:  []string{"Write documentation for {S}.", "Document how the team runs {T}, including {A}.", "Write clear internal docs and architecture notes for {T}."},
		detail:   []string{"Covers the audience, a page structure, diagrams, examples and keeping docs current.", "Explains what to document about {A}, where it lives, and how to keep it from rotting."},
		intro:    []string{"Documentation is for the reader in a hurry: lead with the task, not the history.", "Docs for {T} live next to the code and change in the same pull request."},
		triggers: []string{"a {T} setup has no docs", "new engineers keep asking the same {A} questions", "writing an architecture note for {T}", "docs for {T} are out of date"},
		steps:    []string{"Name the audience and the tasks they come to do.", "Start each page with the most common {A} task.", "Add copy-paste commands and expected output.", "Draw one diagram of how {T} fits with {R}.", "Link runbooks and dashboards.", "Review the docs when {T} changes."},
		pitfalls: []string{"docs that describe how {T} used to work", "walls of text with no commands", "documenting {A} in chat threads nobody can find"},
	},
	{
		slug: "debugging", verb: "debug", tag: "debugging",
		summary:  []string{"Debug {S} in development and production.", "Debug hard {A} bugs in {T} with the right tools.", "Track down {T} bugs related to {A}."},
		detail:   []string{"Covers reproducing, narrowing down, debuggers, tracing and logging.", "Explains a systematic approach: reproduce, bisect, instrument, fix, add a test."},
		intro:    []string{"A bug you can reproduce is half fixed.", "Narrow the search space before reading code line by line."},
		triggers: []string{"a bug in {A} cannot be reproduced locally", "{T} behaves differently in production", "an error message from {T} makes no sense", "stepping through {T} code with a debugger"},
		steps:    []string{"Reproduce the bug with the smallest input.", "Bisect the change history to find when {A} broke.", "Add logging or tracing around the suspect {T} calls.", "Use a debugger to inspect state at the failure.", "Fix the cause and add a regression test.", "Write down what made the {A} bug hard to find."},
		pitfalls: []string{"changing several things at once while debugging", "leaving debug logging in {T} code", "trusting an error message without reading the source"},
	},
	{
		slug: "best-practices", verb: "follow best practices for", tag: "best-practices",
		summary:  []string{"Team conventions and best practices for {S}.", "Follow proven practices for {A} in {T}.", "A style guide and checklist for {T} projects."},
		detail:   []string{"Covers project layout, naming, configuration, error handling, testing and review checklists.", "Explains the conventions the team agreed on for {A}, with examples and reasons."},
		intro:    []string{"Conventions save arguments: follow these unless you have a reason you can write down.", "These practices for {T} come from incidents and reviews, not taste."},
		triggers: []string{"starting a new {T} project", "unsure how the team handles {A} in {T}", "agreeing on {T} conventions", "a review keeps raising the same {T} issues"},
		steps:    []string{"Use the standard project layout for {T}.", "Name things after what they do, not how.", "Handle {A} the same way everywhere.", "Keep configuration in one place and validate it at start.", "Test the behaviour, not the implementation.", "Automate every rule a linter can check."},
		pitfalls: []string{"conventions that exist only in one person's head", "copying {T} patterns from old code that predates the guide", "rules without reasons"},
	},
	{
		slug: "deployment", verb: "deploy", tag: "deployment",
		summary:  []string{"Deploy {S} safely to production.", "Roll out {T} changes with canaries and fast rollback, minding {A}.", "Zero-downtime deployment of {T}."},
		detail:   []string{"Covers build artifacts, environment promotion, canary or blue-green rollout, health checks and rollback.", "Explains how to ship {T} changes gradually and undo them in one step."},
		intro:    []string{"Every deploy should be boring: small, gradual and reversible.", "Deploy {T} the same way every time, through the pipeline, never by hand."},
		triggers: []string{"shipping a {T} change to production", "setting up continuous deployment for {T}", "a {T} deploy caused downtime", "rolling out {A} changes gradually"},
		steps:    []string{"Build one immutable artifact and promote it through environments.", "Run database and {A} changes before the code that needs them.", "Deploy to a canary and compare its error rate with the rest.", "Roll out in stages with health checks between them.", "Keep rollback one command away and test it.", "Announce the deploy and watch dashboards for a while."},
		pitfalls: []string{"deploying on Friday evening without a rollback plan", "health checks that pass while {A} is broken", "manual steps that are not in the pipeline"},
	},
	{
		slug: "configuration", verb: "configure", tag: "configuration",
		summary:  []string{"Configure {S} correctly for production.", "Choose and manage {T} configuration for {A}.", "Manage {T} settings as code with safe defaults."},
		detail:   []string{"Covers the settings that matter, defaults to change, configuration as code and validating changes.", "Explains each important {A} setting, its trade-off and a recommended value."},
		intro:    []string{"Most {T} outages start with a configuration change; review them like code.", "Keep {T} configuration in version control and apply it with a tool."},
		triggers: []string{"setting up {T} for production", "a {A} setting needs changing", "{T} configuration drifted between environments", "reviewing a {T} configuration change"},
		steps:    []string{"List every {T} setting that differs from the defaults and why.", "Store configuration in version control.", "Validate configuration in CI before it is applied.", "Apply {A} changes to staging first.", "Document each non-obvious setting next to it.", "Detect drift between environments automatically."},
		pitfalls: []string{"copying production settings from an old blog post", "configuration edited by hand on one server", "a setting changed without a note on why"},
	},
	{
		slug: "audit", verb: "audit", tag: "audit",
		summary:  []string{"Audit {S} for risks and compliance.", "Run a periodic audit of {T} covering {A}, access and data handling.", "Check {T} against the team's compliance requirements."},
		detail:   []string{"Covers access reviews, configuration checks, evidence collection and follow-up tickets.", "Explains what auditors ask about {T}, where to find evidence, and how to track findings."},
		intro:    []string{"An audit is only useful if findings turn into tickets with owners.", "Collect evidence from {T} automatically so the next audit takes an hour."},
		triggers: []string{"a compliance audit covers {T}", "quarterly access review of {T}", "checking {A} against policy", "preparing evidence about {T} for auditors"},
		steps:    []string{"List who has access to {T} and remove what is unused.", "Export the current {A} configuration and compare it with policy.", "Collect logs proving controls work.", "File a ticket with an owner for every finding.", "Automate the checks that were manual this time.", "Share a short report with the team."},
		pitfalls: []string{"evidence gathered by screenshots", "findings without owners", "auditing {T} once a year only"},
	},
	{
		slug: "alerting", verb: "alert on", tag: "alerting",
		summary:  []string{"Design alerts for {S} that page only when it matters.", "Write alert rules for {A} in {T} with clear thresholds and runbooks.", "Reduce alert fatigue for {T}."},
		detail:   []string{"Covers symptom-based alerts, burn-rate alerts on SLOs, severities, routing and silencing.", "Explains how to pick thresholds for {A}, route alerts to owners and test them."},
		intro:    []string{"Every page should be urgent, actionable and real.", "Alert on the error budget, not on every blip of {A}."},
		triggers: []string{"on-call is paged too often for {T}", "defining alerts for a new {T} service", "an outage of {A} went unnoticed", "setting SLOs for {T}"},
		steps:    []string{"Define an SLO for the user-facing behaviour of {T}.", "Alert on fast and slow error budget burn.", "Send non-urgent {A} warnings to a ticket queue, not a pager.", "Link a runbook from every alert.", "Test alerts by injecting failures in staging.", "Delete alerts that nobody acted on for a quarter."},
		pitfalls: []string{"paging on CPU usage", "thresholds copied from another {T} cluster", "alerts without runbooks"},
	},
	{
		slug: "onboarding", verb: "learn", tag: "onboarding",
		summary:  []string{"Onboard new engineers to {S}.", "Learn how the team uses {T}, starting with {A}.", "A guided introduction to {T} for newcomers."},
		detail:   []string{"Covers core concepts, a first hands-on exercise, where things live and who to ask.", "Explains {T} from first principles with exercises on {A}."},
		intro:    []string{"Start with one real task, not with the whole manual.", "By the end you should be able to change {A} in {T} and ship it."},
		triggers: []string{"a new engineer joins a team that uses {T}", "you have never used {T} before", "learning {A} in {T}", "preparing a {T} workshop"},
		steps:    []string{"Read the one-page overview of how the team uses {T}.", "Run {T} locally and complete the first exercise on {A}.", "Pair with an experienced engineer on a small change.", "Read the runbooks and dashboards for {T}.", "Ship a small change to production with a buddy.", "Write down what confused you and improve the docs."},
		pitfalls: []string{"reading docs for days without touching {T}", "skipping the runbooks", "being afraid to ask about {A}"},
	},
	{
		slug: "refactoring", verb: "refactor", tag: "refactoring",
		summary:  []string{"Refactor {S} code without changing behaviour.", "Clean up legacy {T} code around {A} in safe steps.", "Pay down technical debt in {T} code."},
		detail:   []string{"Covers characterisation tests, small steps, feature flags and measuring the result.", "Explains how to restructure {A} code with tests as a safety net."},
		intro:    []string{"Refactoring without tests is rewriting with extra risk.", "Make the change easy, then make the easy change."},
		triggers: []string{"{T} code around {A} is hard to change", "a module grew too large", "removing deprecated {T} APIs", "preparing {A} code for a new feature"},
		steps:    []string{"Write characterisation tests that pin current {A} behaviour.", "Refactor in small commits that each pass the tests.", "Separate refactoring commits from behaviour changes.", "Use feature flags for risky swaps.", "Delete dead code as you find it.", "Measure build time and complexity before and after."},
		pitfalls: []string{"mixing behaviour changes into a refactoring", "a months-long branch that never merges", "refactoring {T} code nobody will touch again"},
	},
	{
		slug: "design", verb: "design", tag: "architecture",
		summary:  []string{"Design {S} for a new system.", "Make architecture decisions about {A} in {T} and record them.", "Design review checklist for systems built on {T}."},
		detail:   []string{"Covers requirements, trade-offs, failure modes, data flow and an architecture decision record.", "Explains how to weigh options for {A}, write the decision down, and review it."},
		intro:    []string{"Write the design down before building: a page now saves a quarter later.", "Every design names its failure modes and how {T} behaves in each."},
		triggers: []string{"designing a new service on {T}", "choosing how to handle {A}", "writing an architecture decision record for {T}", "a design review involves {T}"},
		steps:    []string{"State the requirements and non-goals.", "List at least two options for {A} with their trade-offs.", "Describe failure modes and how {T} recovers.", "Estimate load, data size and cost.", "Record the decision and its reasons in an ADR.", "Review the design with the owners of {R}."},
		pitfalls: []string{"designing for scale you will never reach", "no written record of why {A} was chosen", "ignoring how {T} fails"},
	},
}

var genericSentences = []string{
	"Check the {T} version in use first; behaviour differs between major versions.",
	"Post what you changed and why in the team channel.",
	"Keep a link to the dashboard for {T} handy while you work.",
	"If anything looks off, stop and ask the owners of {T} before continuing.",
	"Prefer small, reversible changes over big ones.",
	"Write down every assumption you make about {R}.",
	"Follow the team's change management process for production.",
	"Use the staging environment to try each change first.",
	"Never paste secrets or customer data into tickets or chat.",
	"Ask for a second pair of eyes on anything that touches production data.",
}

var backgroundSentences = []string{
	"{T} is used by several teams here, each with slightly different settings, so confirm which setup you are looking at.",
	"The shared {T} clusters are owned by the platform team; application teams own their own configuration.",
	"Most questions about {A} come up during incidents, which is why this skill favours commands over theory.",
	"Upstream documentation for {T} is good but assumes a fresh install; ours has years of history.",
	"{R} sits in front of or next to {T} in most of our services and often explains odd behaviour.",
	"We pin {T} versions per environment and upgrade them together twice a year.",
	"Metrics for {T} are scraped every 30 seconds and kept for 90 days.",
	"Changes to production {T} go through a reviewed pull request, even in an emergency.",
	"Expect {A} to behave differently under load than on a laptop.",
	"Older services still use the previous {T} conventions; do not copy from them without checking.",
	"When in doubt, prefer the managed offering of {T} over running it yourself.",
	"Keep notes as you go: the next person to touch {A} will thank you.",
	"Cost and reliability pull in different directions for {T}; write down which one you chose.",
	"Most {T} defaults are tuned for small installations, not for our traffic.",
}
