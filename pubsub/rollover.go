package pubsub

import (
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// maintain moves subscriptions that follow the current period to the new period after a rollover. Calendar
// periods roll over by the clock; the SEASON window's current period is read from Redis (seasonNow), so a season
// started or ended by any process is seen within one PeriodCheck, and at once in the process that did it
// (Hub.SeasonChanged).
func (b *board) maintain() {
	h := b.h
	now := h.store.Now()
	season, seasonEnded := b.seasonNow()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	b.mu.Lock()
	type move struct {
		s  *topSub
		to viewKey
	}
	var moves []move
	for k, vw := range b.views {
		if k.window == leaderboard.AllTime {
			continue
		}
		cur := b.def.Period(k.window, now)
		if k.window == leaderboard.Season {
			cur = season
			// A season that just ended stays current (its final standings): its followers get a snapshot.
			if cur == "" || cur == k.period && !seasonEnded {
				continue
			}
		} else if cur == k.period {
			continue
		}
		for _, f := range vw.feeds {
			for s := range f.subs {
				if s.follow {
					moves = append(moves, move{s, viewKey{k.board, k.window, cur}})
				}
			}
		}
	}
	type rmove struct {
		s  *rankSub
		to watchKey
	}
	var rmoves []rmove
	for k, w := range b.watches {
		if k.window == leaderboard.AllTime {
			continue
		}
		cur := b.def.Period(k.window, now)
		if k.window == leaderboard.Season {
			cur = season
		}
		if cur != "" && cur != k.period {
			for s := range w.subs {
				if s.follow {
					rmoves = append(rmoves, rmove{s, watchKey{k.window, cur, k.player}})
				}
			}
		}
	}
	b.mu.Unlock()
	if len(moves) == 0 && len(rmoves) == 0 {
		return
	}
	views := map[viewKey]*view{}
	for _, m := range moves {
		if views[m.to] == nil {
			views[m.to] = h.viewLocked(b, m.to)
		}
	}
	b.mu.Lock()
	t := time.Now()
	for _, m := range moves {
		if m.s.closed {
			continue
		}
		b.detachTop(m.s)
		b.resetSub(m.s)
		b.attachTop(views[m.to], m.s, t)
	}
	for _, m := range rmoves {
		if m.s.closed {
			continue
		}
		old := m.s.w
		b.leaveWatch(m.s)
		if old.last != nil {
			b.offerRank(m.s, &leaderboard.Entry{PlayerID: old.key.player, Rank: 0}, t)
		}
		b.attachRank(m.to, m.s, t)
	}
	b.mu.Unlock()
	b.signal()
}

// seasonNow returns the current SEASON period of the board ("" when it has none or it could not be read) and
// whether it ended since the last look, reading Redis only while some subscription follows the SEASON window.
func (b *board) seasonNow() (id string, ended bool) {
	if !b.def.HasWindow(leaderboard.Season) {
		return "", false
	}
	b.mu.Lock()
	follows := false
	for k, vw := range b.views {
		if k.window == leaderboard.Season {
			for _, f := range vw.feeds {
				for s := range f.subs {
					follows = follows || s.follow
				}
			}
		}
	}
	for k, w := range b.watches {
		if k.window == leaderboard.Season {
			for s := range w.subs {
				follows = follows || s.follow
			}
		}
	}
	b.mu.Unlock()
	if !follows {
		return "", false
	}
	si, err := b.h.store.LatestSeason(b.h.ctx, b.def.ID)
	if err != nil {
		b.h.cfg.Logger.Warn("pubsub: reading the season failed", "board", b.def.ID, "err", err)
		return "", false
	}
	if si == nil {
		return "", false
	}
	ended = si.ID == b.seasonID && b.seasonRunning && !si.Running
	b.seasonID, b.seasonRunning = si.ID, si.Running
	return si.ID, ended
}
