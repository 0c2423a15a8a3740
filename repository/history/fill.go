package history

// The statements read their parameters from fill_cfg (setParams). Values
// derive from row numbers: k-th issue, j-th task, d-th delivery. A year
// is spread evenly, oldest first; nothing is later than now.

// fillSteps write a year of history.
var fillSteps = []step{
	{"items", `
DROP TABLE IF EXISTS pg_temp.fill_items;
CREATE TEMP TABLE fill_items AS
WITH raw AS (
    SELECT false AS pull, i AS k, (i / 10) % cardinality(c.repos) AS r,
           c.now - interval '365 days' * (1 - (i - 0.5) / c.n_issues) AS at
    FROM fill_cfg c, generate_series(1, c.n_issues) i
    UNION ALL
    SELECT true, p, p % cardinality(c.repos),
           c.now - interval '365 days' * (1 - (p - 0.25) / c.n_pulls)
    FROM fill_cfg c, generate_series(1, c.n_pulls) p
)
-- Issues and pull requests share each repository's numbers, in order of creation.
SELECT raw.pull, raw.k, c.repos[raw.r + 1] AS repo, raw.at,
       (row_number() OVER (PARTITION BY raw.r ORDER BY raw.at, raw.pull, raw.k))::int AS number
FROM raw, fill_cfg c;
CREATE UNIQUE INDEX ON fill_items (pull, k);
ANALYZE fill_items`},

	// A tenth of the issues are parents (an epic, mostly left to a
	// discussion), each with the four sub-issues after it (filed by the
	// lead, assigned to a coder); the rest are top-level issues, two
	// fifths of them assigned when opened, the others discussed two
	// minutes after. One in a hundred top-level issues and one in a
	// hundred parents is still open; every sub-issue of the history is
	// closed. One sub-issue in 2,000 was scheduled for a discussion before
	// its title named a parent: its mark stayed.
	{"issues", `
INSERT INTO issues (repo, number, is_pull, title, body, state, author, labels, assignees, parent_issue,
    depends_on, gitea_created_at, gitea_updated_at, closed_at, closed_by, discussion_due_at, discussed_at,
    synced_at, last_report, last_report_at, comments_synced_at, blocked_by, deps_synced_at)
SELECT it.repo, it.number, false,
       CASE WHEN a.sub THEN '[' || split_part(it.repo, '/', 2) || '][sub][parent #' || par.number || '] ' ELSE '' END
           || (ARRAY['Fix', 'Add', 'Refactor', 'Document', 'Speed up', 'Remove'])[it.k % 6 + 1] || ' '
           || (ARRAY['the login flow', 'the rate limiter', 'search indexing', 'billing export', 'webhook retries',
                     'the cache layer', 'CLI flags', 'error pages'])[it.k / 6 % 8 + 1],
       CASE WHEN a.sub THEN 'Parent: #' || par.number || E'\n\n' ELSE '' END
           || E'## Goal\n\n' || body.text || E'\n\n## Acceptance\n\n- tests pass\n- docs updated\n',
       CASE WHEN a.open THEN 'open' ELSE 'closed' END,
       CASE WHEN a.sub THEN 'lead' ELSE c.humans[it.k % 6 + 1] END,
       ARRAY['type/' || (ARRAY['feat', 'impl', 'bug', 'docs', 'refactor', 'test', 'infrastructure'])[it.k / 3 % 7 + 1],
             'priority/P' || it.k / 7 % 4],
       CASE WHEN b.assigned THEN ARRAY[c.agents[it.k % 5 + 1]] ELSE '{}' END,
       CASE WHEN a.sub THEN par.number END,
       '{}', it.at, x.updated, b.closed, CASE WHEN a.open THEN '' ELSE c.humans[it.k % 5 + 2] END,
       x.due, x.discussed, x.updated,
       CASE WHEN a.open THEN '' ELSE E'[Action Report]\n**Status**: done\n**Summary**: ' || md5(it.k::text) END,
       b.closed - interval '10 minutes', x.updated, '{}', x.updated
FROM fill_items it
CROSS JOIN fill_cfg c
LEFT JOIN fill_items par ON NOT par.pull AND it.k % 10 BETWEEN 2 AND 5 AND par.k = it.k - it.k % 10 + 1
CROSS JOIN LATERAL (SELECT it.k % 10 BETWEEN 2 AND 5 AS sub, it.k % 1000 = 1 OR it.k % 100 = 7 AS open) a
CROSS JOIN LATERAL (SELECT a.sub OR (it.k % 10 <> 1 AND it.k / 10 % 5 < 2) AS assigned,
    CASE WHEN NOT a.open THEN LEAST(it.at + (1 + it.k % 72) * interval '1 hour', c.now - interval '1 second') END AS closed) b
CROSS JOIN LATERAL (SELECT COALESCE(b.closed, LEAST(it.at + interval '1 hour', c.now)) AS updated,
    CASE WHEN NOT b.assigned OR (a.sub AND it.k % 2000 = 2) THEN it.at + interval '2 minutes' END AS due,
    CASE WHEN NOT b.assigned THEN it.at + interval '2 minutes 3 seconds' END AS discussed) x
CROSS JOIN LATERAL (SELECT string_agg(md5((it.k * 31 + s)::text), CASE WHEN s % 6 = 0 THEN E'\n' ELSE ' ' END) AS text
    FROM generate_series(1, 4 + it.k % 40) s) body
WHERE NOT it.pull`},

	// Pull requests close the issue numbered just before them; one in 500
	// is still open (stale), the others merged but one in nine.
	{"pull_requests", `
INSERT INTO pull_requests (repo, number, author, title, head_ref, head_sha, base_ref, state, merged, merged_by,
    linked_issues, changes_requested_by, gitea_updated_at, closed_at, synced_at)
SELECT it.repo, it.number, c.agents[it.k % 5 + 1],
       'Fix #' || (it.number - 1) || ': ' || (ARRAY['login', 'limiter', 'search', 'export', 'retries', 'cache',
           'flags', 'errors'])[it.k % 8 + 1],
       'fix/' || (it.number - 1) || '-' || (ARRAY['login', 'limiter', 'search', 'export', 'retries', 'cache',
           'flags', 'errors'])[it.k % 8 + 1],
       md5('head' || it.k) || left(md5('sha' || it.k), 8), 'main',
       CASE WHEN a.open THEN 'open' ELSE 'closed' END, NOT a.open AND it.k % 9 <> 0,
       CASE WHEN NOT a.open AND it.k % 9 <> 0 THEN 'lead' ELSE '' END,
       ARRAY[it.repo || '#' || (it.number - 1)], '{}', a.updated,
       CASE WHEN NOT a.open THEN a.updated END, a.updated
FROM fill_items it
CROSS JOIN fill_cfg c
CROSS JOIN LATERAL (SELECT it.k % 500 = 0 AS open,
    LEAST(it.at + (2 + it.k % 48) * interval '1 hour', c.now - interval '1 second') AS updated) a
WHERE it.pull`},

	// Every parent of the history had its round reviewed once its
	// sub-issues closed, under the key DueRounds gives that set. They are
	// written first, so that the newest ids are those of the tasks below,
	// spread over the year as they would be (listing newest first meets
	// every status and agent in its share, not a block of reviews).
	{"round_reviews", `
INSERT INTO task_state (repo, issue_number, action_type, agent, status, dispatch_count, priority, daemon_meta,
    issue_body_cache, dedupe_key, not_before, created_at, updated_at, finished_at)
SELECT p.repo, p.number, 'round_review', 'lead', 'done', 1, 2,
       jsonb_build_object('event', 'ticker/rounds', 'round', 1, 'title', p.title, 'labels', to_jsonb(p.labels),
           'report', jsonb_build_object('Status', 'done', 'Summary', 'Round complete: ' || md5(p.number::text))),
       p.body, 'round#' || p.number || ':' || s.numbers, s.done, s.done, s.done + interval '20 minutes',
       s.done + interval '20 minutes'
FROM issues p
CROSS JOIN fill_cfg c
CROSS JOIN LATERAL (SELECT string_agg(i.number::text, ',' ORDER BY i.number) AS numbers,
    LEAST(max(i.closed_at) + interval '1 minute', c.now - interval '30 minutes') AS done
    FROM issues i WHERE i.repo = p.repo AND i.parent_issue = p.number AND NOT i.is_pull) s
WHERE p.parent_issue IS NULL AND s.numbers IS NOT NULL
ORDER BY s.done`},

	// Tasks follow the issues and pull requests of their time. Of every
	// hundred: 30 issue_assigned, 15 review_request, 12 review_result, 8
	// review_comment, 10 mention, 8 ci_failure, 8 discussion, 4
	// issue_closed, 3 review_merged, 1 review_updated, 1 deploy or
	// infrastructure failure; 88 % done, 7 % failed, 5 % cancelled, in
	// every hundred.
	{"tasks", `
INSERT INTO task_state (repo, issue_number, pr_number, parent_issue, action_type, business_type, agent, status,
    retry_count, dispatch_count, max_retries, priority, depends_on, daemon_meta, issue_body_cache, issue_updated_at,
    dedupe_key, hop_count, not_before, last_error, created_at, updated_at, finished_at)
SELECT CASE WHEN k.pull THEN pr.repo WHEN k.repo_level THEN c.repos[j % cardinality(c.repos) + 1] ELSE iss.repo END,
       CASE WHEN k.pull THEN pr.number WHEN k.repo_level THEN 0 ELSE iss.number END,
       CASE WHEN k.pull THEN pr.number END,
       CASE WHEN NOT k.pull AND NOT k.repo_level THEN isu.parent_issue END,
       k.action,
       CASE WHEN k.action = 'issue_assigned'
            THEN (ARRAY['feature', 'impl', 'bug', 'docs', 'refactor', 'test', 'infrastructure'])[j / 3 % 7 + 1] ELSE '' END,
       k.agent, s.status,
       s.retries, s.retries + 1, 2, j / 7 % 4, '{}',
       jsonb_build_object('event', k.event, 'title', COALESCE(isu.title, 'Fix #' || pr.number),
           'labels', to_jsonb(COALESCE(isu.labels, ARRAY['type/feat', 'priority/P2'])),
           'sender', c.humans[j % 6 + 1], 'issue_author', c.humans[j % 5 + 1], 'delivery_id', md5('d' || j))
         || CASE WHEN k.pull THEN jsonb_build_object('head_sha', md5('head' || pr.k) || left(md5('sha' || pr.k), 8),
                'head_branch', 'fix/' || (pr.number - 1)) ELSE '{}' END
         || CASE WHEN k.action = 'review_result' THEN jsonb_build_object('review_state',
                CASE WHEN j % 3 = 0 THEN 'approved' ELSE 'request_changes' END, 'review_body', md5('r' || j),
                'reviewer', c.agents[6 + j % 2]) ELSE '{}' END
         || CASE WHEN s.status = 'done' THEN jsonb_build_object('report', jsonb_build_object('Status', 'done',
                'Summary', 'Implemented ' || md5('s' || j), 'Branch', 'fix/' || j)) ELSE '{}' END,
       CASE WHEN k.pull THEN 'Closes #' || (pr.number - 1) ELSE COALESCE(isu.body, '') END,
       t.created - interval '5 minutes',
       CASE k.action
           WHEN 'discussion' THEN 'discussion#' || iss.number || '/' || k.agent
           WHEN 'ci_failure' THEN 'ci#' || pr.number || '/' || md5('ci' || j) || '/ci/build'
           WHEN 'issue_closed' THEN 'closed#' || iss.number || '@' || to_char(t.created, 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
           WHEN 'review_merged' THEN 'merged#' || pr.number || '/' || j
           WHEN 'deploy_failure' THEN 'commit@' || md5('c' || j) || '/deploy/production'
           WHEN 'infrastructure_failure' THEN 'commit@' || md5('c' || j) || '/runner/health'
       END,
       CASE WHEN k.action = 'mention' THEN j % 3 ELSE 0 END,
       t.created,
       CASE s.status WHEN 'failed' THEN 'exit status 1 (attempt 3 of 3): ' || md5('e' || j)
                     WHEN 'cancelled' THEN 'cancelled: the issue was closed' ELSE '' END,
       t.created, t.finished, t.finished
FROM fill_cfg c
CROSS JOIN LATERAL (SELECT c.n_tasks - c.n_issues / 10 AS n) g
CROSS JOIN generate_series(1, g.n) j
CROSS JOIN LATERAL (SELECT c.now - interval '365 days' * (1 - (j - 0.5) / g.n) AS created) t0
CROSS JOIN LATERAL (SELECT t0.created,
    LEAST(t0.created + (5 + j % 240) * interval '1 minute', c.now - interval '1 second') AS finished) t
CROSS JOIN LATERAL (SELECT j % 100 AS a) a
CROSS JOIN LATERAL (SELECT CASE WHEN a.a < 30 THEN 'issue_assigned' WHEN a.a < 45 THEN 'review_request'
        WHEN a.a < 57 THEN 'review_result' WHEN a.a < 65 THEN 'review_comment' WHEN a.a < 75 THEN 'mention'
        WHEN a.a < 83 THEN 'ci_failure' WHEN a.a < 91 THEN 'discussion' WHEN a.a < 95 THEN 'issue_closed'
        WHEN a.a < 98 THEN 'review_merged' WHEN a.a < 99 THEN 'review_updated'
        WHEN j % 2 = 0 THEN 'deploy_failure' ELSE 'infrastructure_failure' END AS action) k0
CROSS JOIN LATERAL (SELECT k0.action,
    k0.action IN ('review_request', 'review_result', 'review_comment', 'ci_failure', 'review_merged', 'review_updated') AS pull,
    k0.action IN ('deploy_failure', 'infrastructure_failure') AS repo_level,
    CASE WHEN k0.action IN ('review_request', 'review_updated') THEN c.agents[6 + j % 2]
         WHEN k0.action IN ('mention', 'discussion', 'issue_closed') THEN c.agents[j % 8 + 1]
         ELSE c.agents[j % 5 + 1] END AS agent,
    CASE k0.action WHEN 'issue_assigned' THEN 'issues/assigned' WHEN 'review_request' THEN 'pull_request/review_requested'
        WHEN 'review_result' THEN 'pull_request_review/rejected' WHEN 'review_comment' THEN 'pull_request_review/comment'
        WHEN 'mention' THEN 'issue_comment/created' WHEN 'discussion' THEN 'ticker/discussions'
        WHEN 'issue_closed' THEN 'issues/closed' WHEN 'review_merged' THEN 'pull_request/closed'
        WHEN 'review_updated' THEN 'pull_request/synchronized' ELSE 'status' END AS event) k
CROSS JOIN LATERAL (SELECT j * 37 % 100 AS v) v
CROSS JOIN LATERAL (SELECT CASE WHEN v.v < 88 THEN 'done' WHEN v.v < 95 THEN 'failed' ELSE 'cancelled' END AS status,
    CASE WHEN v.v BETWEEN 88 AND 94 THEN 2 WHEN j % 7 = 0 THEN 1 ELSE 0 END AS retries) s
LEFT JOIN fill_items iss ON NOT iss.pull AND iss.k = 1 + (j - 1)::bigint * c.n_issues / g.n
LEFT JOIN fill_items pr ON pr.pull AND pr.k = 1 + (j - 1)::bigint * c.n_pulls / g.n
LEFT JOIN issues isu ON isu.repo = iss.repo AND isu.number = iss.number
ON CONFLICT DO NOTHING`},

	// One attempt per task, a second one for every fifth (its first
	// failed); logs kept (a year's retention).
	{"attempts", `
INSERT INTO task_attempts (task_id, attempt, agent, runner, repo, issue_number, started_at, finished_at, exit_code,
    outcome, error, output_tail, log_path, duration_ms, tokens_in, tokens_out, cost_usd)
SELECT t.id, n, t.agent, 'mozi-' || (t.id % 2 + 1), t.repo, t.issue_number, x.started, x.started + x.took,
       CASE WHEN x.outcome = 'succeeded' THEN 0 WHEN x.outcome = 'failed' THEN 1 END,
       x.outcome,
       CASE WHEN x.outcome = 'succeeded' THEN '' WHEN x.outcome = 'timeout' THEN 'killed after 30m0s'
            ELSE 'exit status 1' END,
       left(repeat('ok  ' || md5(t.id::text) || ' tests passed' || E'\n' || md5((t.id + n)::text) || E'\n', 30),
            400 + (t.id % 1600)::int),
       '/var/lib/mozi/runs/' || t.repo || '/' || t.id || '-' || n || '.log',
       (extract(epoch FROM x.took) * 1000)::bigint, 20000 + t.id % 80000, 2000 + t.id % 9000,
       ((t.id % 300) / 100.0)::numeric(14, 6)
FROM task_state t
CROSS JOIN generate_series(1, CASE WHEN t.id % 5 = 0 THEN 2 ELSE 1 END) n
CROSS JOIN LATERAL (SELECT t.created_at + (n - 1) * interval '2 minutes' AS started,
    LEAST((1 + t.id % 20) * interval '1 minute', GREATEST(t.finished_at - t.created_at, interval '1 second') / 2) AS took,
    CASE WHEN n = 1 AND t.id % 5 = 0 THEN 'failed'
         WHEN t.status = 'failed' THEN CASE WHEN t.id % 3 = 0 THEN 'timeout' ELSE 'failed' END
         WHEN t.status = 'cancelled' THEN 'interrupted' ELSE 'succeeded' END AS outcome) x
`},

	// Deliveries as Gitea 1.25 sends them (the issue, the repository, five
	// user objects: 6 kB on average, 3 kB stored with lz4, as the recorded
	// ones), all processed: most with an effect, some ignored (an event
	// mozi has no use for), some duplicates.
	{"deliveries", `
DROP TABLE IF EXISTS pg_temp.fill_users, pg_temp.fill_repos;
CREATE TEMP TABLE fill_users AS
SELECT login, json_build_object('id', 10 + row_number() OVER (ORDER BY login), 'login', login, 'login_name', '',
        'source_id', 0, 'full_name', initcap(login), 'email', login || '@example.com',
        'avatar_url', 'http://gitea:3000/avatars/' || md5(login), 'html_url', 'http://gitea:3000/' || login,
        'language', 'en-US', 'is_admin', false, 'last_login', '2026-01-05T09:12:44Z', 'created', '2025-01-06T10:00:00Z',
        'restricted', false, 'active', true, 'prohibit_login', false, 'location', '', 'website', '',
        'description', '', 'visibility', 'public', 'followers_count', 0, 'following_count', 0,
        'starred_repos_count', 0, 'username', login)::text AS doc
FROM fill_cfg c, unnest(c.humans || c.agents || ARRAY['acme']) login;
CREATE TEMP TABLE fill_repos AS
SELECT repo, (jsonb_build_object('id', n, 'owner', (SELECT doc FROM fill_users WHERE login = 'acme')::jsonb,
        'name', split_part(repo, '/', 2), 'full_name', repo,
        'description', 'The ' || split_part(repo, '/', 2) || ' service of ACME', 'empty', false,
        'private', true, 'fork', false, 'template', false, 'parent', NULL, 'mirror', false, 'size', 18000,
        'language', '', 'languages_url', 'http://gitea:3000/api/v1/repos/' || repo || '/languages',
        'html_url', 'http://gitea:3000/' || repo, 'url', 'http://gitea:3000/api/v1/repos/' || repo,
        'link', '', 'ssh_url', 'git@gitea:' || repo || '.git', 'clone_url', 'http://gitea:3000/' || repo || '.git',
        'original_url', '', 'website', '', 'stars_count', 0, 'forks_count', 0, 'watchers_count', 4,
        'open_issues_count', 37) || jsonb_build_object('open_pr_counter', 5, 'release_counter', 0,
        'default_branch', 'main', 'archived', false, 'created_at', '2025-01-06T10:00:00Z',
        'updated_at', '2026-01-05T09:12:44Z', 'permissions', json_build_object('admin', true, 'push', true, 'pull', true),
        'has_issues', true, 'internal_tracker', json_build_object('enable_time_tracker', true,
            'allow_only_contributors_to_track_time', true, 'enable_issue_dependencies', true),
        'has_wiki', true, 'has_pull_requests', true, 'has_projects', true, 'has_releases', true,
        'has_packages', true, 'has_actions', true, 'ignore_whitespace_conflicts', false,
        'allow_merge_commits', true, 'allow_rebase', true, 'allow_rebase_explicit', true,
        'allow_squash_merge', true, 'allow_fast_forward_only_merge', true, 'allow_rebase_update', true,
        'default_delete_branch_after_merge', false, 'default_merge_style', 'merge',
        'default_allow_maintainer_edit', false, 'avatar_url', '', 'internal', false, 'mirror_interval', '',
        'object_format_name', 'sha1', 'mirror_updated', '0001-01-01T00:00:00Z', 'repo_transfer', NULL,
        'topics', json_build_array(), 'licenses', json_build_array()))::text AS doc
FROM fill_cfg c, unnest(c.repos) WITH ORDINALITY AS r(repo, n);
INSERT INTO webhook_deliveries (delivery_id, event, event_type, action, repo, headers, body, received_at,
    processed_at, outcome, semantic_key, attempts, next_attempt_at, last_error)
SELECT x.id, e.event, e.event, e.action, x.repo,
       jsonb_build_object('Content-Type', 'application/json', 'User-Agent', 'Go-http-client/1.1',
           'X-Gitea-Delivery', x.id, 'X-Gitea-Event', e.event, 'X-Gitea-Event-Type', e.event,
           'X-Gitea-Signature', md5('sig' || d) || md5('sig2' || d)),
       convert_to(format('{"action":"%s","number":%s,"issue":{"id":%s,"url":"http://gitea:3000/api/v1/repos/%s/issues/%s",'
           '"html_url":"http://gitea:3000/%s/issues/%s","number":%s,"user":%s,"original_author":"","original_author_id":0,'
           '"title":"Fix the %s","body":"%s","ref":"","assets":[],"labels":[{"id":%s,"name":"type/feat",'
           '"exclusive":false,"is_archived":false,"color":"ee0701","description":"A new feature",'
           '"url":"http://gitea:3000/api/v1/repos/%s/labels/%s"}],"milestone":null,"assignee":%s,"assignees":[%s],'
           '"state":"open","is_locked":false,"comments":%s,"created_at":"%s","updated_at":"%s","closed_at":null,'
           '"due_date":null,"pull_request":null,"repository":{"id":%s,"name":"%s","owner":"acme","full_name":"%s"},'
           '"pin_order":0},"repository":%s,"sender":%s,"commit_id":""}',
           e.action, x.number, 100000 + d, x.repo, x.number, x.repo, x.number, x.number, au.doc,
           (ARRAY['login flow', 'rate limiter', 'search', 'export'])[d % 4 + 1], x.text, d % 40, x.repo, d % 40,
           asg.doc, asg.doc, d % 9, x.stamp, x.stamp, d % 12 + 1, split_part(x.repo, '/', 2), x.repo, r.doc, se.doc),
           'UTF8'),
       x.at, x.at + interval '40 milliseconds', x.outcome,
       CASE WHEN x.outcome = 'processed' THEN e.event || '/' || e.action || '/' || x.repo || '#' || x.number || '@' || d END,
       1, x.at, ''
FROM fill_cfg c
CROSS JOIN generate_series(1, c.n_deliveries) d
CROSS JOIN LATERAL (SELECT CASE WHEN d % 20 < 6 THEN 'issues' WHEN d % 20 < 12 THEN 'issue_comment'
        WHEN d % 20 < 16 THEN 'pull_request' WHEN d % 20 < 18 THEN 'pull_request_review' WHEN d % 20 < 19 THEN 'status'
        ELSE 'push' END AS event,
    (ARRAY['opened', 'assigned', 'created', 'edited', 'closed', 'synchronized', 'label_updated'])[d % 7 + 1] AS action) e
CROSS JOIN LATERAL (SELECT
    substr(md5('d' || d), 1, 8) || '-' || substr(md5('d' || d), 9, 4) || '-4' || substr(md5('d' || d), 14, 3) || '-a'
        || substr(md5('d' || d), 18, 3) || '-' || substr(md5('d' || d), 21, 12) AS id,
    c.repos[d % cardinality(c.repos) + 1] AS repo,
    1 + (d::bigint * (c.n_issues + c.n_pulls) / c.n_deliveries / cardinality(c.repos))::int AS number,
    c.now - interval '365 days' * (1 - (d - 0.5) / c.n_deliveries) AS at,
    to_char(c.now - interval '365 days' * (1 - (d - 0.5) / c.n_deliveries), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS stamp,
    CASE WHEN d % 20 = 19 THEN 'ignored' WHEN d % 50 = 3 THEN 'duplicate' WHEN d % 10 = 7 THEN 'ignored'
         ELSE 'processed' END AS outcome,
    CASE WHEN d % 3 = 0 THEN c.agents[d % 8 + 1] ELSE c.humans[d % 6 + 1] END AS sender,
    c.humans[d % 5 + 1] AS author, c.agents[d % 5 + 1] AS assignee,
    (SELECT string_agg(md5((d * 17 + s)::text), ' ') FROM generate_series(1, 3 + d % 30) s) AS text) x
JOIN fill_users au ON au.login = x.author
JOIN fill_users asg ON asg.login = x.assignee
JOIN fill_users se ON se.login = x.sender
JOIN fill_repos r ON r.repo = x.repo`},

	{"effects", `
INSERT INTO webhook_effects (semantic_key, delivery_id, created_at)
SELECT semantic_key, delivery_id, processed_at FROM webhook_deliveries
WHERE outcome = 'processed' AND semantic_key IS NOT NULL`},

	{"mentions", `
INSERT INTO mention_queue (repo, issue_number, comment_id, author, mentioned, hop_count, created_at, consumed_at, outcome)
SELECT iss.repo, iss.number, 1000000 + m, CASE WHEN m % 3 = 0 THEN c.agents[m % 8 + 1] ELSE c.humans[m % 6 + 1] END,
       c.agents[(m + 3) % 8 + 1], m % 3, x.at, x.at + interval '2 seconds',
       CASE WHEN m % 9 = 0 THEN 'skipped' ELSE 'task' END
FROM fill_cfg c
CROSS JOIN generate_series(1, c.n_mentions) m
CROSS JOIN LATERAL (SELECT c.now - interval '365 days' * (1 - (m - 0.5) / c.n_mentions) AS at) x
JOIN fill_items iss ON NOT iss.pull AND iss.k = 1 + (m - 1)::bigint * c.n_issues / c.n_mentions`},

	{"statuses", `
INSERT INTO commit_statuses (repo, status_id, sha, context, state, target_url, description, sender, created_at, matched_at)
SELECT c.repos[s % cardinality(c.repos) + 1], s, md5('status' || s) || left(md5('s' || s), 8),
       CASE WHEN s % 4 = 0 THEN 'deploy/production' ELSE 'ci/build' END, 'failure',
       'http://ci:8080/builds/' || s, 'Build failed: ' || md5('f' || s), 'gitea-actions', x.at,
       CASE WHEN s % 20 <> 0 THEN x.at + interval '1 minute' END
FROM fill_cfg c
CROSS JOIN generate_series(1, c.n_statuses) s
CROSS JOIN LATERAL (SELECT c.now - interval '365 days' * (1 - (s - 0.5) / c.n_statuses) AS at) x`},

	// The prune keeps a day of agent comments (the breaker's look-back).
	{"agent_comments", `
INSERT INTO agent_comments (repo, author, comment_id, created_at)
SELECT c.repos[n % cardinality(c.repos) + 1], c.agents[n % 8 + 1], 5000000 + n,
       c.now - interval '1 day' * (1 - (n - 0.5) / c.n_comments)
FROM fill_cfg c CROSS JOIN generate_series(1, c.n_comments) n`},

	{"drop_items", `DROP TABLE fill_items, fill_users, fill_repos`},
}

// liveSteps write the live state: 200 open issues (20 parents with four
// sub-issues each, of which the sub-issues of two parents are closed: two
// rounds due), 60 open pull requests, and 300 live tasks on them: 200
// issue_assigned (40 pending, 10 claimed, 110 working, 40 in review), 60
// review requests, 20 mentions and 20 CI failures. Working and claimed
// tasks hold a lease of the runner mozi-1 (six hours: longer than a
// benchmark) and a running attempt, but for a fifth of the working ones,
// whose agent exited and who wait for Gitea (some for long: stalled).
// Besides: two discussions due, ten deliveries waiting (two of them
// retrying), one parked, the last hour's processed deliveries, three mentions
// waiting, the catch-up marks, an hour of agent comments.
var liveSteps = []step{
	{"live_issues", `
INSERT INTO issues (repo, number, is_pull, title, body, state, author, labels, assignees, parent_issue,
    gitea_created_at, gitea_updated_at, closed_at, closed_by, discussion_due_at, discussed_at, synced_at)
SELECT x.repo, c.live_base + q, false,
       CASE WHEN x.sub THEN '[' || split_part(x.repo, '/', 2) || '][sub][parent #' || (c.live_base + q - q % 10 + 1) || '] '
            ELSE '' END || 'Live work ' || q,
       CASE WHEN x.sub THEN 'Parent: #' || (c.live_base + q - q % 10 + 1) || E'\n\n' ELSE '' END
           || E'## Goal\n\n' || repeat(md5(q::text) || ' ', 10 + q % 20),
       CASE WHEN x.closed THEN 'closed' ELSE 'open' END,
       CASE WHEN x.sub THEN 'lead' ELSE c.humans[q % 6 + 1] END,
       ARRAY['type/feat', 'priority/P' || q % 4],
       CASE WHEN x.assigned THEN ARRAY[c.agents[q % 5 + 1]] ELSE '{}' END,
       CASE WHEN x.sub THEN c.live_base + q - q % 10 + 1 END,
       x.at, x.at + interval '5 minutes', CASE WHEN x.closed THEN x.at + interval '30 minutes' END,
       CASE WHEN x.closed THEN 'alice' ELSE '' END,
       CASE WHEN x.due THEN c.now - interval '1 minute' WHEN NOT x.assigned THEN x.at + interval '2 minutes' END,
       CASE WHEN NOT x.assigned AND NOT x.due THEN x.at + interval '2 minutes 3 seconds' END,
       c.now - interval '1 minute'
FROM fill_cfg c
CROSS JOIN generate_series(1, 200) q
CROSS JOIN LATERAL (SELECT c.repos[(q / 10) % cardinality(c.repos) + 1] AS repo, q % 10 BETWEEN 2 AND 5 AS sub,
    q % 10 BETWEEN 2 AND 5 AND q % 100 < 10 AS closed, q IN (9, 19) AS due,
    q % 10 BETWEEN 2 AND 5 OR (q % 10 <> 1 AND q NOT IN (9, 19) AND q % 3 > 0) AS assigned,
    c.now - interval '2 days' + q * interval '10 minutes' AS at) x`},

	{"live_pull_requests", `
INSERT INTO pull_requests (repo, number, author, title, head_ref, head_sha, base_ref, state, linked_issues,
    gitea_updated_at, synced_at)
SELECT c.repos[(k / 10) % cardinality(c.repos) + 1], c.live_base + 300 + k, c.agents[k % 5 + 1],
       'Fix #' || (c.live_base + k), 'fix/' || (c.live_base + k) || '-live', md5('live' || k) || left(md5('l' || k), 8),
       'main', 'open', ARRAY[c.repos[(k / 10) % cardinality(c.repos) + 1] || '#' || (c.live_base + k)],
       c.now - interval '1 hour', c.now - k * interval '10 seconds'
FROM fill_cfg c CROSS JOIN generate_series(1, 60) k`},

	{"live_tasks", `
INSERT INTO task_state (repo, issue_number, pr_number, parent_issue, action_type, business_type, agent, status,
    dispatch_count, priority, daemon_meta, issue_body_cache, dedupe_key, hop_count, not_before, lease_owner,
    lease_expires_at, heartbeat_at, created_at, updated_at)
SELECT x.repo, x.number, x.pr, CASE WHEN NOT x.pull AND x.q % 10 BETWEEN 2 AND 5 THEN c.live_base + x.q - x.q % 10 + 1 END,
       x.action, CASE WHEN x.action = 'issue_assigned' THEN 'feature' ELSE '' END, x.agent, x.status,
       CASE WHEN x.status = 'pending' THEN 0 ELSE 1 END, t % 4,
       jsonb_build_object('event', 'issues/assigned', 'title', 'Live work ' || x.q, 'labels',
           jsonb_build_array('type/feat'), 'sender', 'alice'),
       repeat(md5(x.q::text) || ' ', 10 + x.q % 20),
       CASE WHEN x.action = 'ci_failure' THEN 'ci#' || x.pr || '/' || md5('live' || t) || '/ci/build' END,
       0, c.now - interval '1 minute',
       CASE WHEN x.leased THEN 'mozi-1' END, CASE WHEN x.leased THEN c.now + interval '6 hours' END,
       CASE WHEN x.leased THEN c.now END,
       c.now - interval '3 hours' + t * interval '30 seconds',
       CASE WHEN x.status = 'working' AND NOT x.leased AND t % 2 = 0 THEN c.now - interval '2 hours'
            ELSE c.now - interval '10 minutes' END
FROM fill_cfg c
CROSS JOIN generate_series(1, 300) t
CROSS JOIN LATERAL (SELECT CASE WHEN t <= 200 THEN 'issue_assigned' WHEN t <= 260 THEN 'review_request'
        WHEN t <= 280 THEN 'mention' ELSE 'ci_failure' END AS action,
    CASE WHEN t <= 200 THEN CASE WHEN t % 20 < 4 THEN 'pending' WHEN t % 20 = 4 THEN 'claimed'
                                 WHEN t % 20 < 16 THEN 'working' ELSE 'review' END
         WHEN t % 2 = 0 THEN 'pending' ELSE 'working' END AS status,
    CASE WHEN t <= 200 THEN t WHEN t <= 260 THEN t - 200 WHEN t <= 280 THEN t - 260 ELSE t - 280 + 30 END AS q) a
CROSS JOIN LATERAL (SELECT a.action, a.status, a.q,
    a.action IN ('review_request', 'ci_failure') AS pull,
    CASE WHEN a.action IN ('review_request', 'ci_failure') THEN c.repos[(a.q / 10) % cardinality(c.repos) + 1]
         ELSE c.repos[(a.q / 10) % cardinality(c.repos) + 1] END AS repo,
    CASE WHEN a.action IN ('review_request', 'ci_failure') THEN c.live_base + 300 + a.q ELSE c.live_base + a.q END AS number,
    CASE WHEN a.action IN ('review_request', 'ci_failure') THEN c.live_base + 300 + a.q END AS pr,
    CASE WHEN a.action = 'review_request' THEN c.agents[6 + t % 2] WHEN a.action = 'mention' THEN c.agents[t % 8 + 1]
         ELSE c.agents[a.q % 5 + 1] END AS agent,
    a.status = 'claimed' OR (a.status = 'working' AND t % 5 <> 0) AS leased) x`},

	{"live_attempts", `
INSERT INTO task_attempts (task_id, attempt, agent, runner, repo, issue_number, started_at, finished_at, exit_code,
    outcome, output_tail, log_path, duration_ms)
SELECT t.id, 1, t.agent, 'mozi-1', t.repo, t.issue_number, t.updated_at - interval '20 minutes',
       CASE WHEN t.lease_owner IS NULL THEN t.updated_at END, CASE WHEN t.lease_owner IS NULL THEN 0 END,
       CASE WHEN t.lease_owner IS NULL THEN 'succeeded' ELSE 'running' END,
       CASE WHEN t.lease_owner IS NULL THEN repeat('ok ' || md5(t.id::text) || E'\n', 20) ELSE '' END,
       '/var/lib/mozi/runs/' || t.repo || '/' || t.id || '-1.log',
       CASE WHEN t.lease_owner IS NULL THEN 1200000 END
FROM task_state t WHERE t.status IN ('working', 'review')
ORDER BY t.id`},

	{"live_deliveries", `
INSERT INTO webhook_deliveries (delivery_id, event, event_type, action, repo, headers, body, received_at,
    processed_at, outcome, semantic_key, attempts, next_attempt_at, last_error)
SELECT 'live-' || d, 'issue_comment', 'issue_comment', 'created', c.repos[d % cardinality(c.repos) + 1],
       jsonb_build_object('X-Gitea-Event', 'issue_comment', 'X-Gitea-Delivery', 'live-' || d),
       convert_to('{"action":"created","comment":{"body":"' || repeat(md5(d::text), 60) || '"}}', 'UTF8'),
       x.at, CASE WHEN d > 11 THEN x.at + interval '40 milliseconds' END,
       CASE WHEN d > 11 THEN 'processed' WHEN d = 11 THEN 'parked' ELSE '' END,
       CASE WHEN d > 11 THEN 'issue_comment/created/live@' || d END,
       CASE WHEN d > 11 THEN 1 WHEN d = 11 THEN 8 WHEN d > 8 THEN 1 ELSE 0 END,
       CASE WHEN d IN (9, 10) THEN c.now + interval '30 seconds' ELSE x.at END,
       CASE WHEN d BETWEEN 9 AND 11 THEN 'gitea: 502 Bad Gateway' ELSE '' END
FROM fill_cfg c
CROSS JOIN generate_series(1, 211) d
CROSS JOIN LATERAL (SELECT CASE WHEN d <= 11 THEN c.now - d * interval '2 seconds'
    ELSE c.now - interval '1 hour' + (d - 11) * interval '17 seconds' END AS at) x
ORDER BY x.at`},

	{"live_effects", `
INSERT INTO webhook_effects (semantic_key, delivery_id, created_at)
SELECT semantic_key, delivery_id, processed_at FROM webhook_deliveries
WHERE delivery_id LIKE 'live-%' AND semantic_key IS NOT NULL`},

	{"live_mentions", `
INSERT INTO mention_queue (repo, issue_number, comment_id, author, mentioned, created_at, consumed_at, outcome)
SELECT c.repos[(m / 10) % cardinality(c.repos) + 1], c.live_base + m, 9000000 + m, 'alice', c.agents[m % 8 + 1],
       c.now - m * interval '40 seconds', CASE WHEN m > 3 THEN c.now - m * interval '40 seconds' + interval '1 second' END,
       CASE WHEN m > 3 THEN 'task' ELSE '' END
FROM fill_cfg c CROSS JOIN generate_series(1, 23) m`},

	{"live_catch_up", `
INSERT INTO repo_catch_up (repo, caught_up_at)
SELECT r, c.now - interval '2 minutes' FROM fill_cfg c CROSS JOIN unnest(c.repos) r`},

	{"live_agent_comments", `
INSERT INTO agent_comments (repo, author, comment_id, created_at)
SELECT c.repos[n % cardinality(c.repos) + 1], c.agents[n % 8 + 1], 9000000 + n, c.now - n * interval '70 seconds'
FROM fill_cfg c CROSS JOIN generate_series(1, 50) n`},

	{"live_leader", `
INSERT INTO leader_leases (holder, name, expires_at) SELECT 'mozi-1', 'ticker', c.now + interval '15 seconds' FROM fill_cfg c`},
}
