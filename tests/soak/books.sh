# shellcheck shell=bash
# jq and awk programs are single-quoted on purpose: their $names are theirs.
# shellcheck disable=SC2016
# The chaos soak's books (tests/soak/run): the accounting, kept apart from
# the churn so that it can be run, and tested, on a directory alone
# (`tests/soak/run --check-books DIR`, tests/soak/test_books.sh). Every
# time is the soak's own clock, epoch milliseconds. DIR holds:
#
#   account.tsv   one line per container the soak started: name, id ("-"
#                 when docker run failed before saying it), kind, expected
#                 code ("?" for a failed start), when docker run was
#                 issued, when it returned, "ok" or "failed"
#   ids.tsv       name, id: ids of failed starts found later in the engine
#   after.tsv     name, time: when the soak's delayed docker kill or
#                 rm -f of that container succeeded
#   faults.tsv    kind, start, end, victim ("-" if none): every fault the
#                 soak injected (dockerd_restarts: killed..up again;
#                 containerd_kills: killed..dockerd lists one again;
#                 shim_kills: the victim's name; reapd_kills,
#                 upstream_down, upstream_flaps, disk_full, sighup_*)
#   drained       ids the drain killed (their exit is that kill's: 137)
#   engine_lost   ids the engine lost track of: still running by dockerd
#                 after the drain, their process gone (the drain saw it)
#   upstream.jsonl  the upstream receiver's record
#   probe/NAME    what a probe of the engine listed (tasks, ctrs, docker:
#                 the leak probes, required); probe/NAME.failed when the
#                 probe's tool failed (the run then fails)
#   meta          KEY=VALUE: churn_start_ms and churn_end_ms (required),
#                 and figures to print (engine, seed, outbox_pending...)
#   failures      other failures the run found, one a line
#
# A report is matched to the account by its container id or by its name
# (every container the soak starts has a name of its own, soak-SEED-N, so
# a start that failed after the engine created the container is still
# accounted). A report whose code differs from the expected one, or that
# is unknown (exit_code null, exit_code_unknown), is explained only by the
# soak's own fault log: a shim kill of that very container, or a dockerd
# outage or a containerd kill overlapping the container's life on the
# soak's clock (docker run issued .. its latest possible exit, by kind,
# plus the engine's cleanup after it: 40 s more for slow deletes). A kill
# -9 of reapd never explains one: the engine still knew the code.
# A container the engine lost track of (dockerd says running, its
# process is gone, no kill lands: seen once on Docker 28.5 after a
# containerd kill) never exits for the engine: it is not lost by reapd,
# nor leaked, but counted and listed on its own.

# Exits a minute of churn must make, the engine up: about a third of the
# slowest rate measured (the hour on sid, 10.5 a minute).
BOOKS_RATE=${BOOKS_RATE:-5}

# soak_probe DIR NAME CMD...: run CMD (a tool that lists ids) into
# DIR/NAME; tried again while it fails (the engine may be busy for a
# moment); after the last try DIR/NAME.failed says why and it returns 1.
soak_probe() {
  local dir=$1 name=$2 try tries=${PROBE_TRIES:-5}
  shift 2
  mkdir -p "$dir"
  for ((try = 1; try <= tries; try++)); do
    if "$@" >"$dir/$name.out" 2>"$dir/$name.err"; then
      mv "$dir/$name.out" "$dir/$name"
      rm -f "$dir/$name.err" "$dir/$name.failed"
      return 0
    fi
    [ "$try" -eq "$tries" ] || sleep "${PROBE_PAUSE:-1}"
  done
  printf 'probe %s failed %d times (%s): %s\n' "$name" "$tries" "$*" \
    "$(tail -n 3 "$dir/$name.err" | tr '\n' ' ')" >"$dir/$name.failed"
  rm -f "$dir/$name" "$dir/$name.out" "$dir/$name.err"
  return 1
}

# books_delivered DIR: the reports the upstream answered 200 to, in order:
# container id, name, report id, exit code, anomalies, started_at,
# finished_at.
books_delivered() {
  jq -r 'select(.answer == "200" and .path == "/reports") | .body | fromjson? |
         [(.container_id // "-"), (.name // "-"), (.report_id // "-"),
          (.exit_code | tostring), ((.anomalies // []) | join(",")),
          (.started_at // "-"), (.finished_at // "-")] | @tsv' "$1/upstream.jsonl"
}

# books_missing DIR: how many containers that started have no report yet.
books_missing() {
  books_delivered "$1" | awk -F'\t' '
    FILENAME == ARGV[1] { if ($7 == "ok") { n++; nm[n] = $1; id[n] = $2 }; next }
    { got[$1] = 1; got[$2] = 1 }
    END { for (i = 1; i <= n; i++) if (!(nm[i] in got) && !(id[i] in got)) m++
          print m + 0 }' "$1/account.tsv" -
}

# books_ids DIR: every id of the account (failed starts found later too)
# that reapd must leave no trace of: not those the engine lost track of
# (still its own, running for it).
books_ids() {
  {
    cut -f2 "$1/account.tsv"
    if [ -f "$1/ids.tsv" ]; then cut -f2 "$1/ids.tsv"; fi
  } | { grep -v '^-$' || true; } | sort -u |
    if [ -s "$1/engine_lost" ]; then grep -vxFf "$1/engine_lost" || true; else cat; fi
}

# books_leaks DIR: how many of the account's ids the leak probes listed
# (0 when a probe failed: books_check fails on that).
books_leaks() {
  local p
  for p in tasks ctrs docker; do
    [ -f "$1/probe/$p" ] && sort -u "$1/probe/$p"
  done | comm -12 <(books_ids "$1") - | wc -l
}

# books_check DIR: print the books (the soak_ line last) and return 1 when
# anything was lost, unexplained, split, leaked or unprobed, when too few
# exits ran, or when too many starts failed outside the fault windows.
books_check() {
  local dir=$1 f out kv bad=0 why=()
  for f in account.tsv faults.tsv meta upstream.jsonl; do
    [ -f "$dir/$f" ] || { echo "soak: books: no $dir/$f" >&2; return 1; }
  done
  local delivered
  delivered=$(books_delivered "$dir") || { echo "soak: books: $dir/upstream.jsonl unreadable" >&2; return 1; }
  out=$(printf '%s\n' "$delivered" | sed '/^$/d' | awk -F'\t' -v dir="$dir" -v rate="$BOOKS_RATE" '
    function overlap(a, b, c, d) { return a <= d && b >= c }
    function rel(t) { return t >= INF ? "never" : sprintf("+%.1fs", (t - cs) / 1000) }
    # The latest exit on the soak clock a container of kind K can have.
    function latest(i,   k) {
      k = ak[i]
      if (ast[i] != "ok") return ar[i] + 5000
      if (k == "restart") return ar[i] + 8000
      if (k == "sigkill" || k == "other" || k == "shimkill")
        return (an[i] in aft) ? aft[an[i]] + 2000 : INF
      return ar[i] + 4000
    }
    function cleanup(i) { return ak[i] == "slow" ? 45000 : 5000 }
    # The fault of the log that explains a wrong or unknown exit of i.
    function explain(i,   j, lo, hi) {
      for (j = 1; j <= nf; j++)
        if (fk[j] == "shim_kills" && (fv[j] == an[i] || fv[j] == aid[i])) return "shim"
      lo = ai[i]; hi = latest(i) + cleanup(i)
      for (j = 1; j <= nf; j++)
        if (fk[j] == "dockerd_restarts" && overlap(lo, hi, fs[j] - 1000, fe[j] + 5000)) return "dockerd"
      for (j = 1; j <= nf; j++)
        if (fk[j] == "containerd_kills" && overlap(lo, hi, fs[j] - 1000, fe[j] + 5000)) return "containerd"
      return ""
    }
    # A loss of i the fault log explains: a container the engine removes
    # (--rm, docker rm -f) whose exit came while the disk of the state was
    # full, a dockerd restart after it (the events of the engine gone), and reapd
    # killed before the disk freed, or within 2 s after (the store is
    # tried again each second): its code was in the memory of reapd only
    # (docs/state.md, "Disk full").
    function lost_explained(i,   j, k, m, lo, hi) {
      if (ak[i] != "rm" && ak[i] != "other") return 0
      lo = ai[i]; hi = latest(i) + cleanup(i)
      for (j = 1; j <= nf; j++) {
        if (fk[j] != "disk_full" || !overlap(lo, hi, fs[j], fe[j])) continue
        for (m = 1; m <= nf; m++) {
          if (fk[m] != "reapd_kills" || fs[m] < lo || fs[m] < fs[j] || fs[m] > fe[j] + 2000) continue
          for (k = 1; k <= nf; k++)
            if (fk[k] == "dockerd_restarts" && fs[k] >= lo - 1000 && fs[k] <= fs[m]) return 1
        }
      }
      return 0
    }
    # The faults within 10 s of a window, for a reader to chase.
    function near(lo, hi,   j, s) {
      s = ""
      for (j = 1; j <= nf; j++)
        if (overlap(lo - 10000, hi + 10000, fs[j], fe[j]))
          s = s " " fk[j] "@" rel(fs[j]) ".." rel(fe[j]) (fv[j] != "-" && fv[j] != "" ? "(" fv[j] ")" : "")
      return s == "" ? " none" : s
    }
    function window(i) {
      return "issued " rel(ai[i]) " returned " rel(ar[i]) " latest exit " rel(latest(i)) \
        " engine cleanup until " rel(latest(i) + cleanup(i))
    }
    BEGIN {
      INF = 9e15
      while ((getline l < (dir "/meta")) > 0) {
        k = l; sub(/=.*/, "", k); v = l; sub(/^[^=]*=/, "", v); meta[k] = v
      }
      cs = meta["churn_start_ms"] + 0; ce = meta["churn_end_ms"] + 0
      while ((getline l < (dir "/faults.tsv")) > 0) {
        split(l, f, "\t"); nf++
        fk[nf] = f[1]; fs[nf] = f[2] + 0; fe[nf] = f[3] + 0; fv[nf] = f[4]
      }
      while ((getline l < (dir "/after.tsv")) > 0) {
        split(l, f, "\t"); if (!(f[1] in aft)) aft[f[1]] = f[2] + 0
      }
      while ((getline l < (dir "/drained")) > 0) drained[l] = 1
      while ((getline l < (dir "/engine_lost")) > 0) elost[l] = 1
      while ((getline l < (dir "/account.tsv")) > 0) {
        split(l, f, "\t"); na++
        an[na] = f[1]; aid[na] = f[2]; ak[na] = f[3]; aw[na] = f[4]
        ai[na] = f[5] + 0; ar[na] = f[6] + 0; ast[na] = f[7]
        byname[f[1]] = na
        if (f[2] != "-" && f[2] != "") byid[f[2]] = na
      }
      while ((getline l < (dir "/ids.tsv")) > 0) {
        split(l, f, "\t")
        if (!(f[1] in byname)) continue
        i = byname[f[1]]
        if (aid[i] == "-" || aid[i] == "") aid[i] = f[2]
        byid[f[2]] = i
      }
    }
    {
      i = 0
      if ($1 in byid) i = byid[$1]
      else if ($2 in byname) i = byname[$2]
      if (!i) {
        if (!(($1, $2) in unacc_seen)) {
          unacc_seen[$1, $2] = 1; unacc++; unexpl++
          printf "soak: unexplained: unaccounted report: id=%s name=%s got=%s anomalies=[%s] started_at=%s finished_at=%s\n", \
            $1, $2, $4, $5, $6, $7 > "/dev/stderr"
        }
        next
      }
      if (!((i, $3) in seen)) { seen[i, $3] = 1; nrid[i]++ }
      if (i in judged) next
      judged[i] = 1
      isunk = ($4 == "null" && $5 ~ /(^|,)exit_code_unknown(,|$)/)
      if (isunk) unknown++
      # A failed start: no code was expected of it.
      if (ast[i] != "ok") next
      if (!isunk && $4 == aw[i]) next
      # Still running at the end, killed by the drain: 137.
      if (!isunk && (aid[i] in drained) && $4 == "137") next
      e = explain(i)
      if (e != "")
        printf "soak: explained (%s): id=%s name=%s kind=%s want=%s got=%s anomalies=[%s]; window: %s\n", \
          e, aid[i], an[i], ak[i], aw[i], $4, $5, window(i) > "/dev/stderr"
      # A code the engine lost is said by the report: null, or a flag.
      flagged = isunk || $5 ~ /(^|,)(exited_while_engine_down|task_lost)(,|$)/
      if (e == "shim") unknowable++
      else if (e == "dockerd") {
        byengine++
        if (!flagged) unflagged++
      } else if (e == "containerd") {
        dist++
        if (!flagged) unflagged++
      }
      else {
        unexpl++
        if (!isunk) wrong++
        printf "soak: unexplained: id=%s name=%s kind=%s want=%s got=%s anomalies=[%s] started_at=%s finished_at=%s; window: %s; faults near:%s\n", \
          aid[i], an[i], ak[i], aw[i], $4, $5, $6, $7, window(i), near(ai[i], latest(i) + cleanup(i)) > "/dev/stderr"
      }
    }
    END {
      for (i = 1; i <= na; i++) {
        if (ast[i] == "ok") {
          exits++; kinds[ak[i]]++
          if (!(i in judged) && (aid[i] in elost)) {
            lost_engine++
            printf "soak: lost by the engine (running for dockerd, its process gone, no kill lands): id=%s name=%s kind=%s want=%s; window: %s\n", aid[i], an[i], ak[i], aw[i], window(i) > "/dev/stderr"
          } else if (!(i in judged) && lost_explained(i)) {
            lost_disk++
            printf "soak: lost, explained (disk full, dockerd restart, reapd killed before the disk freed): id=%s name=%s kind=%s want=%s; window: %s\n", aid[i], an[i], ak[i], aw[i], window(i) > "/dev/stderr"
          } else if (!(i in judged)) {
            lost++
            if (lost <= 20)
              printf "soak: lost: id=%s name=%s kind=%s want=%s; window: %s\n", aid[i], an[i], ak[i], aw[i], window(i) > "/dev/stderr"
          }
        } else {
          failed++
          for (j = 1; j <= nf; j++)
            if ((fk[j] == "dockerd_restarts" || fk[j] == "containerd_kills") &&
                overlap(ai[i], ar[i], fs[j] - 1000, fe[j] + 5000)) break
          if (j > nf) {
            failed_out++
            printf "soak: start failed outside the fault windows: name=%s kind=%s issued %s returned %s\n", \
              an[i], ak[i], rel(ai[i]), rel(ar[i]) > "/dev/stderr"
          }
        }
        if (nrid[i] > 1) {
          split_++
          printf "soak: one exit under %d report ids: id=%s name=%s\n", nrid[i], aid[i], an[i] > "/dev/stderr"
        }
      }
      # The churn with the engine up: its span less the dockerd and
      # containerd windows in it (merged, so that none counts twice).
      nw = 0
      for (j = 1; j <= nf; j++) {
        if (fk[j] != "dockerd_restarts" && fk[j] != "containerd_kills") continue
        a = fs[j] < cs ? cs : fs[j]; b = fe[j] > ce ? ce : fe[j]
        if (a >= b) continue
        nw++; ws[nw] = a; we[nw] = b
      }
      for (x = 2; x <= nw; x++)
        for (y = x; y > 1 && ws[y] < ws[y - 1]; y--) {
          t = ws[y]; ws[y] = ws[y - 1]; ws[y - 1] = t
          t = we[y]; we[y] = we[y - 1]; we[y - 1] = t
        }
      down = 0; reach = cs
      for (x = 1; x <= nw; x++) {
        a = ws[x] > reach ? ws[x] : reach
        if (we[x] > a) { down += we[x] - a; reach = we[x] }
      }
      up = ce - cs - down
      if (up < 0) up = 0
      floor_ = int(rate * up / 60000)
      starts = exits + failed
      bound = int(starts / 100); if (bound < 2) bound = 2
      for (j = 1; j <= nf; j++) nfk[fk[j]]++
      ks = ""
      n = split("quick g255 slow sigkill restart rm other shimkill", kn, " ")
      for (x = 1; x <= n; x++) if (kinds[kn[x]]) ks = ks kn[x] "=" kinds[kn[x]] " "
      fsum = ""
      n = split("containerd_kills disk_full dockerd_restarts reapd_kills shim_kills sighup_invalid sighup_valid upstream_down upstream_flaps", kn, " ")
      for (x = 1; x <= n; x++) if (nfk[kn[x]]) fsum = fsum kn[x] "=" nfk[kn[x]] " "
      printf "exits=%d\nlost=%d\nwrong=%d\nunknown=%d\nunexplained=%d\nunknowable=%d\n", exits, lost, wrong, unknown, unexpl, unknowable
      printf "byengine=%d\nunflagged=%d\ndisturbed=%d\nsplit=%d\nunaccounted=%d\nlost_disk=%d\nlost_engine=%d\n", byengine, unflagged, dist, split_, unacc, lost_disk, lost_engine
      printf "failed=%d\nfailed_out=%d\nfailed_bound=%d\nfloor=%d\nup_s=%d\n", failed, failed_out, bound, floor_, up / 1000
      printf "reapd_kills=%d\ndockerd_restarts=%d\nkinds=%s\nfaults=%s\n", nfk["reapd_kills"], nfk["dockerd_restarts"], ks, fsum
    }') || { echo "soak: books: the accounting failed" >&2; return 1; }
  declare -A B=() M=()
  while IFS= read -r kv; do B[${kv%%=*}]=${kv#*=}; done <<<"$out"
  while IFS= read -r kv; do M[${kv%%=*}]=${kv#*=}; done <"$dir/meta"

  # Leaks: what the probes listed of the account's ids; a probe that
  # failed, or never ran, fails the run.
  local p probes_failed=0 leaked_tasks=0 leaked_ctrs=0 leaked_docker=0 n id ids
  ids=$(books_ids "$dir")
  for p in tasks ctrs docker running names; do
    if [ -f "$dir/probe/$p.failed" ]; then
      echo "soak: $(cat "$dir/probe/$p.failed")" >&2
      probes_failed=$((probes_failed + 1))
    elif [ ! -f "$dir/probe/$p" ]; then
      case $p in tasks | ctrs | docker)
        echo "soak: probe $p never ran" >&2
        probes_failed=$((probes_failed + 1))
        ;;
      esac
    fi
  done
  for p in tasks ctrs docker; do
    [ -f "$dir/probe/$p" ] || continue
    n=0
    while read -r id; do
      [ -n "$id" ] || continue
      n=$((n + 1))
      echo "soak: leaked ($p): $id $(awk -F'\t' -v id="$id" '$2 == id {print $1, $3, $4}' "$dir/account.tsv")" >&2
    done < <(sort -u "$dir/probe/$p" | comm -12 <(echo "$ids") -)
    printf -v "leaked_$p" %d "$n"
  done
  local dups
  dups=$(jq -r 'select(.answer == "200" and .path == "/reports") | .idempotency_key' \
    "$dir/upstream.jsonl" | sort | uniq -d -c | awk '{n += $1 - 1} END {print n + 0}')
  local others=0
  if [ -s "$dir/failures" ]; then
    while IFS= read -r f; do echo "soak: $f" >&2; done <"$dir/failures"
    others=$(grep -c . "$dir/failures" || true)
  fi

  [ "${B[lost]}" = 0 ] || why+=("${B[lost]} lost")
  [ "${B[unexplained]}" = 0 ] || why+=("${B[unexplained]} unexplained")
  [ "${B[split]}" = 0 ] || why+=("${B[split]} split")
  [ $((leaked_tasks + leaked_ctrs + leaked_docker)) = 0 ] || why+=("leaks")
  [ "$probes_failed" = 0 ] || why+=("$probes_failed probes failed")
  [ "${B[exits]}" -ge "${B[floor]}" ] || why+=("too few exits (${B[exits]} < ${B[floor]})")
  [ "${B[failed_out]}" -le "${B[failed_bound]}" ] ||
    why+=("${B[failed_out]} starts failed outside the fault windows (at most ${B[failed_bound]})")
  [ "$others" = 0 ] || why+=("$others other failures")
  if [ "${#why[@]}" -gt 0 ]; then
    bad=1
    f=$(printf '%s, ' "${why[@]}")
    echo "soak: FAILED: ${f%, } (see above)" >&2
  fi

  echo "soak: engine=${M[engine]:-} dockerd=${M[dockerd]:-} minutes=${M[minutes]:-} elapsed_s=${M[elapsed_s]:-} seed=${M[seed]:-}"
  echo "soak: kinds: ${B[kinds]}failed_starts=${B[failed]}"
  echo "soak: faults: ${B[faults]}"
  echo "soak: exits ${B[exits]}, floor ${B[floor]} ($BOOKS_RATE a minute over ${B[up_s]} s of churn with the engine up); starts failed ${B[failed]}, ${B[failed_out]} outside the fault windows (at most ${B[failed_bound]})"
  echo "soak_codes_lost_by_engine=${B[byengine]} soak_codes_lost_unflagged=${B[unflagged]} soak_codes_lost_in_restarts=${B[disturbed]} soak_codes_unknown=${B[unknown]} soak_codes_unknowable=${B[unknowable]} soak_split_reports=${B[split]} soak_unaccounted_reports=${B[unaccounted]} soak_reports_lost_to_disk_full=${B[lost_disk]} soak_lost_by_engine=${B[lost_engine]} soak_leaked_engine_containers=$leaked_docker soak_failed_starts=${B[failed]} soak_failed_starts_unexpected=${B[failed_out]} soak_exit_floor=${B[floor]} soak_probes_failed=$probes_failed outbox_pending=${M[outbox_pending]:-} outbox_dead=${M[outbox_dead]:-} reloads_ok=${M[reloads_ok]:-} reloads_rejected=${M[reloads_rejected]:-}"
  echo "soak_exits=${B[exits]} soak_reports_lost=${B[lost]} soak_wrong_codes=${B[wrong]} soak_leaked_tasks=$leaked_tasks soak_leaked_containers=$((leaked_ctrs + leaked_docker)) soak_duplicate_deliveries=$dups reapd_kills=${B[reapd_kills]} dockerd_restarts=${B[dockerd_restarts]} soak_unknown=${B[unknown]} soak_unexplained=${B[unexplained]}"
  return "$bad"
}
