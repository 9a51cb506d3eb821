// The statistics and the race of tune/timing, on a CPU with fake samplers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gemmtune/error.hpp"
#include "tune/timing.hpp"

namespace gemmtune {
namespace {

// A fake GPU: candidate i takes speed[i] µs, scaled by a clock that drifts by `drift` (a
// fraction) with every sample taken by anyone, times uniform noise of +-`noise` from a
// seeded generator. Records the order of the calls.
struct FakeClock {
  std::vector<double> speed;
  double drift = 0, noise = 0;
  uint64_t state = 1;
  long t = 0;
  std::vector<size_t> calls = {};

  double uniform() {  // splitmix64 -> [-1, 1)
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return double(z >> 11) / double(1ull << 52) - 1;
  }
  double operator()(size_t i) {
    calls.push_back(i);
    return speed[i] * (1 + drift * double(t++)) * (1 + noise * uniform());
  }
  Sampler sampler() {
    return [this](size_t i) { return (*this)(i); };
  }
  size_t count(size_t i) const { return size_t(std::count(calls.begin(), calls.end(), i)); }
};

// min 5, max 15, prune 1.3, tie 2% (or within the spreads) x 16 rounds, prefer 0.25%; the duels
// (step 5) off, so these tests see steps 1-4 alone; the Duel tests below turn it on.
TuneOptions opts() {
  TuneOptions o;
  o.duel_rounds = 0;
  return o;
}

TEST(SummarizeTest, EmptyIsAllZero) {
  Stats s = summarize({});
  EXPECT_EQ(s.samples, 0);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.p20, 0);
  EXPECT_EQ(s.p80, 0);
  EXPECT_EQ(s.min, 0);
}

TEST(SummarizeTest, OneSample) {
  Stats s = summarize({7.5});
  EXPECT_EQ(s.samples, 1);
  EXPECT_DOUBLE_EQ(s.median, 7.5);
  EXPECT_DOUBLE_EQ(s.p20, 7.5);
  EXPECT_DOUBLE_EQ(s.p80, 7.5);
  EXPECT_DOUBLE_EQ(s.min, 7.5);
}

TEST(SummarizeTest, OddCountUnsortedInput) {
  Stats s = summarize({50, 10, 40, 20, 30});
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.median, 30);
  EXPECT_DOUBLE_EQ(s.p20, 18);  // position 0.8: 10 + 0.8 * 10
  EXPECT_DOUBLE_EQ(s.p80, 42);  // position 3.2: 40 + 0.2 * 10
  EXPECT_DOUBLE_EQ(s.min, 10);
}

TEST(SummarizeTest, EvenCountInterpolates) {
  Stats s = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);  // position 1.5
  EXPECT_DOUBLE_EQ(s.p20, 1.6);     // position 0.6
  EXPECT_DOUBLE_EQ(s.p80, 3.4);     // position 2.4
  EXPECT_DOUBLE_EQ(s.min, 1);
  Stats two = summarize({10, 20});
  EXPECT_DOUBLE_EQ(two.median, 15);
  EXPECT_DOUBLE_EQ(two.p20, 12);
  EXPECT_DOUBLE_EQ(two.p80, 18);
}

TEST(RaceTest, NoCandidates) {
  FakeClock c;
  RaceResult r = race(0, c.sampler(), opts());
  EXPECT_EQ(r.winner, -1);
  EXPECT_TRUE(r.stats.empty());
  EXPECT_TRUE(c.calls.empty());
}

TEST(RaceTest, InvalidOptionsThrow) {
  FakeClock c{.speed = {1, 2}};
  TuneOptions o = opts();
  o.min_rounds = 0;
  EXPECT_THROW(race(2, c.sampler(), o), Error);
  o = opts();
  o.max_rounds = o.min_rounds - 1;
  EXPECT_THROW(race(2, c.sampler(), o), Error);
  o = opts();
  o.prune_ratio = 0.9;
  EXPECT_THROW(race(2, c.sampler(), o), Error);
  o = opts();
  o.tie_tolerance = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(race(2, c.sampler(), o), Error);
  EXPECT_TRUE(c.calls.empty());
}

// Round r starts at candidate r mod survivors; a clear result stops after min_rounds.
TEST(RaceTest, RoundsAreInterleavedAndRotated) {
  FakeClock c{.speed = {100, 110, 120}};
  RaceResult r = race(3, c.sampler(), opts());
  std::vector<size_t> expected = {0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2, 1, 2, 0};
  EXPECT_EQ(c.calls, expected);
  EXPECT_EQ(r.winner, 0);
  EXPECT_EQ(r.spread, 0);
}

TEST(RaceTest, FasterCandidateWinsUnderNoise) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    // 5% faster: beyond prefer_margin (3%), so the evidence must win over the stable order.
    FakeClock c{.speed = {100, 103, 95, 100, 101}, .noise = 0.03, .state = seed};
    RaceResult r = race(5, c.sampler(), opts());
    EXPECT_EQ(r.winner, 2) << "seed " << seed;
    EXPECT_GT(r.spread, 0);
    const Stats& w = r.stats[2];
    EXPECT_DOUBLE_EQ(r.spread, (w.p80 - w.p20) / w.median);
  }
}

// A clock where every sample is slower than the last, equal candidates. Sampled in a fixed
// order, candidate 0 would always run first and win every race. Rotated, the favoured one is
// whoever opens the median round, which moves with the race's length: over races of every
// length, each candidate wins about 1/k of them.
TEST(RaceTest, DriftDoesNotFavourCandidateZero) {
  for (size_t k = 3; k <= 5; ++k) {
    std::vector<int> wins(k);
    int races = 0;
    for (int max_rounds = 5; max_rounds <= 15; ++max_rounds) {
      for (int tie_rounds = 0; tie_rounds <= 11; ++tie_rounds) {
        TuneOptions o = opts();
        o.max_rounds = max_rounds;
        o.tie_rounds = tie_rounds;
        o.prefer_margin = 0;  // measure the rotation alone, not the preference for index 0
        FakeClock c{.speed = std::vector<double>(k, 100), .drift = 0.002};
        RaceResult r = race(k, c.sampler(), o);
        ASSERT_GE(r.winner, 0);
        ++wins[size_t(r.winner)];
        ++races;
      }
    }
    for (size_t i = 0; i < k; ++i) {
      EXPECT_GT(wins[i], races / int(2 * k)) << "k " << k << " candidate " << i;
      EXPECT_LT(wins[i], races * 3 / int(2 * k)) << "k " << k << " candidate " << i;
    }
  }
}

// Under the same drift (up to 20% over a race), a candidate 3% faster wins wherever it sits.
TEST(RaceTest, DriftStillPicksTrulyFaster) {
  for (size_t fast = 0; fast < 4; ++fast) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      // Noise far below the drift: still every sample slower than the last.
      FakeClock c{.speed = {100, 100, 100, 100}, .drift = 0.002, .noise = 0.0002, .state = seed};
      c.speed[fast] = 95;  // beyond prefer_margin (3%)
      RaceResult r = race(4, c.sampler(), opts());
      EXPECT_EQ(r.winner, long(fast)) << "seed " << seed;
    }
  }
}

// Re-timing the near-ties adds later (slower, under drift) samples to them only; a candidate
// already beaten by more than tie_tolerance and the spreads must not win on its older, faster
// samples.
TEST(RaceTest, WinnerComesFromReTimedNearTies) {
  TuneOptions o = opts();
  o.max_rounds = o.min_rounds;  // no extra rounds: the spreads stay those of 5 rounds
  FakeClock c{.speed = {100, 100.2, 109}, .drift = 0.006};
  RaceResult r = race(3, c.sampler(), o);
  EXPECT_LT(r.stats[2].median, r.stats[0].median);  // stale, from earlier rounds
  EXPECT_EQ(r.winner, 0);
}

TEST(RaceTest, PrunesClearlySlowerAfterMinRounds) {
  FakeClock c{.speed = {100, 200, 100.5}, .noise = 0.01, .state = 3};
  TuneOptions o = opts();
  RaceResult r = race(3, c.sampler(), o);
  EXPECT_TRUE(r.pruned[1]);
  EXPECT_FALSE(r.pruned[0]);
  EXPECT_FALSE(r.pruned[2]);
  EXPECT_EQ(c.count(1), size_t(o.min_rounds));
  EXPECT_EQ(r.stats[1].samples, o.min_rounds);  // keeps its stats
  EXPECT_NEAR(r.stats[1].median, 200, 4);
  EXPECT_GT(c.count(0), size_t(o.min_rounds));
  EXPECT_EQ(c.count(0), c.count(2));
  EXPECT_NE(r.winner, 1);
}

TEST(RaceTest, ErrorMarksCandidateFailedOthersRace) {
  FakeClock c{.speed = {100, 50, 110}};
  int calls1 = 0;
  Sampler s = [&](size_t i) {
    if (i == 1 && ++calls1 == 3) GT_THROW("launch failed: too many resources");
    return c(i);
  };
  RaceResult r = race(3, s, opts());
  EXPECT_EQ(r.failure[1], "launch failed: too many resources");
  EXPECT_TRUE(r.failure[0].empty());
  EXPECT_TRUE(r.failure[2].empty());
  EXPECT_EQ(calls1, 3);  // never sampled again
  EXPECT_EQ(r.stats[1].samples, 2);
  EXPECT_EQ(r.winner, 0);
  EXPECT_EQ(r.stats[0].samples, 5);
}

TEST(RaceTest, InvalidTimeFailsCandidate) {
  FakeClock c{.speed = {100, 90}};
  Sampler s = [&](size_t i) { return i == 1 ? std::nan("") : c(i); };
  RaceResult r = race(2, s, opts());
  EXPECT_FALSE(r.failure[1].empty());
  EXPECT_EQ(r.winner, 0);
}

TEST(RaceTest, OtherExceptionsPropagate) {
  Sampler s = [](size_t i) -> double {
    if (i == 1) throw std::logic_error("bug");
    return 1.0;
  };
  EXPECT_THROW(race(2, s, opts()), std::logic_error);
}

TEST(RaceTest, AllFailedNoWinner) {
  Sampler s = [](size_t i) -> double { GT_THROW("candidate " + std::to_string(i) + " failed"); };
  RaceResult r = race(3, s, opts());
  EXPECT_EQ(r.winner, -1);
  EXPECT_EQ(r.spread, 0);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r.failure[i], "candidate " + std::to_string(i) + " failed");
}

TEST(RaceTest, ExactTiesGoToLowestIndex) {
  FakeClock all{.speed = {100, 100, 100}};
  EXPECT_EQ(race(3, all.sampler(), opts()).winner, 0);
  FakeClock later{.speed = {120, 100, 105, 100}};
  EXPECT_EQ(race(4, later.sampler(), opts()).winner, 1);
}

TEST(RaceTest, DeterministicForDeterministicSampler) {
  auto run = [] {
    FakeClock c{.speed = {100, 101, 99.5, 130, 100.2}, .drift = 0.001, .noise = 0.02, .state = 42};
    RaceResult r = race(5, c.sampler(), opts());
    return std::make_pair(r, c.calls);
  };
  auto [a, calls_a] = run();
  auto [b, calls_b] = run();
  EXPECT_EQ(calls_a, calls_b);
  EXPECT_EQ(a.winner, b.winner);
  EXPECT_EQ(a.spread, b.spread);
  EXPECT_EQ(a.pruned, b.pruned);
  EXPECT_EQ(a.failure, b.failure);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.stats[i].median, b.stats[i].median);
    EXPECT_EQ(a.stats[i].samples, b.stats[i].samples);
  }
}

// Only candidates within tie_tolerance of the best get the extra head-to-head rounds.
TEST(RaceTest, TieRetimingOnlyForNearTies) {
  TuneOptions o = opts();
  FakeClock c{.speed = {100, 100.5, 105}};
  RaceResult r = race(3, c.sampler(), o);
  EXPECT_EQ(c.count(0), size_t(o.min_rounds + o.tie_rounds));
  EXPECT_EQ(c.count(1), size_t(o.min_rounds + o.tie_rounds));
  EXPECT_EQ(c.count(2), size_t(o.min_rounds));
  EXPECT_EQ(r.winner, 0);
  // The tie rounds are interleaved and keep rotating: the tied pair alternates who goes first.
  std::vector<size_t> tail(c.calls.end() - 2 * o.tie_rounds, c.calls.end());
  for (int k = 0; k < o.tie_rounds; ++k) EXPECT_NE(tail[2 * k], tail[2 * k + 1]);
  EXPECT_NE(tail[0], tail[2]);

  FakeClock apart{.speed = {100, 110}};
  race(2, apart.sampler(), o);
  EXPECT_EQ(apart.count(0), size_t(o.min_rounds));
  EXPECT_EQ(apart.count(1), size_t(o.min_rounds));
}

// A candidate further than tie_tolerance from the leader but within the two spreads (noisy
// short kernels) is re-timed head to head too; a clearly beaten one is not.
TEST(RaceTest, TieRetimingIncludesPairsWithinTheirNoise) {
  TuneOptions o = opts();
  o.tie_tolerance = 0.02;
  std::vector<int> n(3);
  const double speed[3] = {100, 103, 120};
  // +-3% around each speed, cycling: each candidate's p20..p80 spread is about 4%.
  Sampler s = [&](size_t i) { return speed[i] * (1.0 + 0.03 * ((n[i]++ % 3) - 1)); };
  RaceResult r = race(3, s, o);
  EXPECT_EQ(n[0], n[1]);           // 0 and 1 both re-timed (3% apart, inside their spreads)
  EXPECT_GT(n[1], n[2]);           // 2 was not
  EXPECT_EQ(r.winner, 0);
}

// An unclear leader (lead within the combined spreads) gets more rounds, up to max_rounds.
TEST(RaceTest, ContinuesWhileLeaderUnclear) {
  TuneOptions o = opts();
  std::vector<int> n(2);
  const double speed[2] = {100, 105};
  Sampler s = [&](size_t i) { return speed[i] * (n[i]++ % 2 ? 1.2 : 0.8); };  // +-20%, alternating
  RaceResult r = race(2, s, o);
  // max_rounds, then (still within their spreads) the head-to-head tie rounds.
  EXPECT_EQ(n[0], o.max_rounds + o.tie_rounds);
  EXPECT_EQ(n[1], o.max_rounds + o.tie_rounds);
  EXPECT_EQ(r.winner, 0);
}

}  // namespace
TEST(RaceTest, NearTiesGoToTheEarlierCandidate) {
  // Within prefer_margin of the fastest, the lowest index (the caller's preference) wins...
  TuneOptions o = opts();
  o.prefer_margin = 0.01;
  FakeClock close{.speed = {110, 100.5, 100}};
  EXPECT_EQ(race(3, close.sampler(), o).winner, 1);
  // ...but not when the fastest leads by more than the margin, nor after pruning.
  FakeClock apart{.speed = {110, 101.5, 100}};
  EXPECT_EQ(race(3, apart.sampler(), o).winner, 2);
  FakeClock slow{.speed = {200, 100}};
  EXPECT_EQ(race(2, slow.sampler(), o).winner, 1);
  // A margin of 0: the plain fastest.
  o.prefer_margin = 0;
  FakeClock zero{.speed = {110, 100.5, 100}};
  EXPECT_EQ(race(3, zero.sampler(), o).winner, 2);
  o.prefer_margin = -1;
  FakeClock bad{.speed = {100}};
  EXPECT_THROW(race(1, bad.sampler(), o), Error);
}

// ---- step 5: the duel ----------------------------------------------------------------------------

// A sampler whose every round shares one large random factor (+-25%: clock changes that hit
// everything sampled close together) while candidate i's true time is speed[i]. Counts calls.
struct CommonNoise {
  std::vector<double> speed;
  uint64_t state = 7;
  std::vector<int> n = std::vector<int>(speed.size());
  double factor = 1;
  size_t since_change = 0, group = 2;  // a new factor every `group` samples (one duel round)
  double operator()(size_t i) {
    if (since_change++ % group == 0) {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      factor = 1 + 0.25 * (double((z ^ (z >> 31)) >> 11) / double(1ull << 52) - 1);
    }
    ++n[i];
    return speed[i] * factor;
  }
};

// Two candidates 3% apart under a per-round factor far larger than their difference: the
// paired ratio sees exactly 3% and the faster one wins every time; the duel is reported.
TEST(RaceDuelTest, PairedRatiosCancelCommonNoise) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    TuneOptions o;
    CommonNoise c{.speed = {100, 97}, .state = seed};
    RaceResult r = race(2, [&](size_t i) { return c(i); }, o);
    EXPECT_EQ(r.winner, 1) << "seed " << seed;
    // Whichever the marginal medians preferred, the duel measured the true ratio.
    ASSERT_EQ(r.duels.size(), 1u) << "seed " << seed;
    const Duel& d = r.duels[0];
    ASSERT_TRUE((d.champion == 0 && d.challenger == 1) || (d.champion == 1 && d.challenger == 0)) << "seed " << seed;
    EXPECT_NEAR(d.ratio, c.speed[size_t(d.champion)] / c.speed[size_t(d.challenger)], 1e-12) << "seed " << seed;
  }
}

// A challenger faster by less than prefer_margin does not unseat the preferred candidate.
TEST(RaceDuelTest, WithinPreferMarginThePreferredStays) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    TuneOptions o;
    CommonNoise c{.speed = {100, 99.8}, .state = seed};  // 0.2% faster, the margin is 0.25%
    RaceResult r = race(2, [&](size_t i) { return c(i); }, o);
    EXPECT_EQ(r.winner, 0) << "seed " << seed;
    ASSERT_EQ(r.duels.size(), 1u);
    EXPECT_NEAR(r.duels[0].ratio, 100.0 / 99.8, 1e-12);
    EXPECT_FALSE(r.duels[0].challenger_won);
  }
}

// The preference is settled by the duel, not by marginal medians: the earliest candidate within
// duel_window of the fastest duels it, and keeps the win only within prefer_margin on the
// paired ratios, whatever the (noisy) marginal medians said.
TEST(RaceDuelTest, TheEarliestWithinTheWindowDuelsTheFastest) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    TuneOptions o;
    CommonNoise slower{.speed = {103, 100}, .state = seed};  // the preferred one 3% slower: loses
    RaceResult a = race(2, [&](size_t i) { return slower(i); }, o);
    ASSERT_EQ(a.duels.size(), 1u) << "seed " << seed;
    EXPECT_EQ(a.duels[0].champion, 0);
    EXPECT_EQ(a.duels[0].challenger, 1);
    EXPECT_EQ(a.winner, 1) << "seed " << seed;
    CommonNoise close{.speed = {100.2, 100}, .state = seed};  // 0.2% slower: within the margin, keeps it
    RaceResult b = race(2, [&](size_t i) { return close(i); }, o);
    ASSERT_EQ(b.duels.size(), 1u) << "seed " << seed;
    EXPECT_EQ(b.duels[0].champion, 0);
    EXPECT_EQ(b.winner, 0) << "seed " << seed;
  }
}

// The duel adds exactly duel_rounds samples to the two duellists (and none to anyone else),
// and only happens when they are near (duel_window, 5%): a clearly faster candidate wins
// without one.
TEST(RaceDuelTest, OnlyNearPairsDuelForDuelRounds) {
  TuneOptions o;
  o.duel_rounds = 10;
  o.duels = 1;
  FakeClock c{.speed = {100, 101.5, 104}};  // 1 within tie_tolerance (2%) of 0, 2 is not
  RaceResult r = race(3, c.sampler(), o);
  EXPECT_EQ(r.winner, 0);
  ASSERT_EQ(r.duels.size(), 1u);
  EXPECT_EQ(r.duels[0].challenger, 1);
  EXPECT_EQ(c.count(0), size_t(o.min_rounds + o.tie_rounds + o.duel_rounds));
  EXPECT_EQ(c.count(1), size_t(o.min_rounds + o.tie_rounds + o.duel_rounds));
  EXPECT_EQ(c.count(2), size_t(o.min_rounds));

  // Outside the near-ties (3% apart, no noise: no tie rounds) but within duel_window (5%): a duel.
  FakeClock window{.speed = {100, 103}};
  RaceResult w = race(2, window.sampler(), o);
  EXPECT_EQ(w.winner, 0);
  ASSERT_EQ(w.duels.size(), 1u);
  EXPECT_EQ(w.duels[0].challenger, 1);
  EXPECT_EQ(window.count(1), size_t(o.min_rounds + o.duel_rounds));
  o.duel_window = 0.02;
  FakeClock narrow{.speed = {100, 103}};
  EXPECT_TRUE(race(2, narrow.sampler(), o).duels.empty());
  EXPECT_EQ(narrow.count(1), size_t(o.min_rounds));
  o.duel_window = 0.05;

  FakeClock apart{.speed = {110, 100}};
  RaceResult q = race(2, apart.sampler(), o);
  EXPECT_EQ(q.winner, 1);
  EXPECT_TRUE(q.duels.empty());
  EXPECT_EQ(apart.count(1), size_t(o.min_rounds));
}

// Several duels settle a three-way near-tie that the marginal medians order wrongly: candidate
// 1 looked 3% slow in its first rounds and is truly the fastest. The champion (0) loses to the
// marginal leader (2), which then meets 1 and loses too; with one duel, 2 would have won.
TEST(RaceDuelTest, ChampionMeetsTheNextChallengers) {
  for (int duels : {1, 3}) {
    TuneOptions o;
    o.duels = duels;
    int n1 = 0;
    Sampler s = [&](size_t i) {
      if (i == 0) return 100.0;
      if (i == 2) return 98.5;
      return n1++ < o.min_rounds ? 103.0 : 97.0;
    };
    RaceResult r = race(3, s, o);
    if (duels == 1) {
      EXPECT_EQ(r.winner, 2);
      ASSERT_EQ(r.duels.size(), 1u);
    } else {
      EXPECT_EQ(r.winner, 1);
      ASSERT_EQ(r.duels.size(), 2u);
      EXPECT_EQ(r.duels[1].champion, 2);
      EXPECT_EQ(r.duels[1].challenger, 1);
      EXPECT_TRUE(r.duels[1].challenger_won);
    }
    EXPECT_EQ(r.duels[0].champion, 0);
    EXPECT_EQ(r.duels[0].challenger, 2);
    EXPECT_TRUE(r.duels[0].challenger_won);
  }
}

// A duellist that fails during the duel loses it; both failing leaves no winner.
TEST(RaceDuelTest, FailingDuellistLoses) {
  TuneOptions o;
  for (size_t bad : {size_t(0), size_t(1)}) {
    int calls = 0;
    Sampler s = [&](size_t i) {
      ++calls;
      if (i == bad && calls > 2 * (o.min_rounds + o.tie_rounds)) GT_THROW("lost the device");
      return i == 0 ? 100.0 : 100.5;
    };
    RaceResult r = race(2, s, o);
    EXPECT_EQ(r.winner, long(1 - bad)) << "bad " << bad;
    EXPECT_FALSE(r.failure[bad].empty());
  }
  int calls = 0;
  Sampler both = [&](size_t i) {
    if (++calls > 2 * (o.min_rounds + o.tie_rounds)) GT_THROW("lost the device");
    return i == 0 ? 100.0 : 100.5;
  };
  EXPECT_EQ(race(2, both, o).winner, -1);
  o.duel_rounds = -1;
  EXPECT_THROW(race(2, both, o), Error);
}

}  // namespace gemmtune
