"""The room's records of a prompt the engine finished: per-block outcomes with anonymised origins, and the totals."""

from __future__ import annotations

from kvviz.engine import LLMEngine, RequestOutput
from kvviz.experiments.room.records import OTHER, YOU, Admission, BlockOutcome
from kvviz.experiments.room.session import BlockOrigin
from kvviz.experiments.room.timing import TimingSample


class PromptRecords:
    """``Room``'s bookkeeping of admitted prompts (a base of ``Room``: it reads and updates the room's
    sessions, origins, totals, feed and timings under the room's lock)."""

    def _record(self, engine: LLMEngine, ticket: tuple, out: RequestOutput, latency_ms: float) -> Admission:
        """The room's records of a prompt the engine finished (the mirror of cached hashes already holds the
        blocks its step cached, unless a later step evicted them)."""
        session_id, tokens, before, truncated, salt, salt_mode, generation = ticket
        with self._lock:
            now = self._clock()
            hashes = engine.manager.request_block_hashes(tokens, salt)  # pure: the hasher, no pool state
            blocks = self._outcomes(session_id, tokens, hashes, engine.block_size, out.num_cached_tokens, now)
            m = out.metrics
            compute = round(m.compute_share_s * 1000.0, 3)
            wait = round(max(0.0, latency_ms - compute), 3)  # the rest of its wall time: running step, queue, others
            self._seq += 1
            adm = Admission(
                ok=True, session_id=session_id, prompt_no=self._seq, request_id=out.request_id, token_ids=tokens,
                num_tokens_before_truncation=before, truncated=truncated, cache_salt=salt, salt_mode=salt_mode,
                hit_tokens=out.num_cached_tokens, blocks=blocks, at=now, compute_ms=compute, wait_ms=wait,
                latency_ms=round(latency_ms, 3), step_requests=m.max_step_requests,
                first_token_id=out.token_ids[0] if out.token_ids else None,
            )
            from_others = adm.blocks_from_others
            session = self._sessions.get(session_id)  # None when it left the room meanwhile
            if session is not None and generation == self.generation:  # not a prompt from before a reset
                session.prompts += 1
                session.prompt_tokens += adm.num_tokens
                session.hit_tokens += adm.hit_tokens
                session.blocks_from_others += from_others
                session.last = adm
            self._prompts += 1
            self._prompt_tokens += adm.num_tokens
            self._hit_tokens += adm.hit_tokens
            self._cross_hits += from_others
            self._truncated += int(truncated)
            self._feed.append({"prompt_no": adm.prompt_no, "session_id": session_id, "num_tokens": adm.num_tokens,
                               "hit_tokens": adm.hit_tokens, "from_others": from_others, "salted": salt is not None,
                               "at": now, "prefill_ms": compute, "wait_ms": wait,
                               "step_requests": adm.step_requests})
            self._timings.append((TimingSample(adm.hit_tokens > 0, compute, adm.num_tokens, now), wait))
            return adm

    def _outcomes(self, sid: str, tokens: tuple[int, ...], hashes: list, bs: int, hit_tokens: int,
                  now: float) -> tuple[BlockOutcome, ...]:
        """Per logical block: reused (with its anonymised origin), computed now, or partial. Records the
        origin of newly cached hashes (only those the pool caches) and counts hits by other sessions."""
        num_hit = hit_tokens // bs
        out: list[BlockOutcome] = []
        for index, start in enumerate(range(0, len(tokens), bs)):
            end = min(start + bs, len(tokens))
            if end - start < bs:
                out.append(BlockOutcome(index, start, end, "partial", None, None, None))
                continue
            h = hashes[index]
            origin = self._origins.get(h)
            cached = h in self._cached
            if index < num_hit:
                if origin is None:  # another client's block, or one a prompt of the same step has not reported
                    origin = BlockOrigin(None, now)
                    if cached:
                        self._origins[h] = origin
                who = YOU if origin.session_id == sid else OTHER
                if who == OTHER:
                    origin.hits_by_others += 1
                out.append(BlockOutcome(index, start, end, "hit", h, who, origin.created_at))
                continue
            if cached and origin is None:
                self._origins[h] = BlockOrigin(sid, now)
            elif cached and origin.session_id is None:  # a prompt of the same step hit it before we reported
                origin.session_id = sid
            out.append(BlockOutcome(index, start, end, "computed", h, YOU, now))
        return tuple(out)
