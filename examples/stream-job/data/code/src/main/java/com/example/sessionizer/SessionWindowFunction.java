package com.example.sessionizer;

/**
 * Groups the clicks of one user into sessions: a session closes after `gapMillis` without a
 * click. Every click of an open session is kept in keyed state until the session closes.
 */
public class SessionWindowFunction extends KeyedProcessFunction<String, Click, SessionSummary> {
    private final long gapMillis;
    private transient SessionState state;

    public SessionWindowFunction(long gapMillis) {
        this.gapMillis = gapMillis;
    }

    @Override
    public void open(RuntimeContext ctx) {
        state = new SessionState(ctx.getKeyedStateStore());
    }

    /**
     * Appends the click to the open session and re-arms the gap timer. A user that never
     * pauses for `gapMillis` (a crawler, a bot) keeps its session open for ever: its state
     * grows without bound, since there is no cap on events per session and no state TTL.
     */
    @Override
    public void process(Click click, Context ctx, Collector<SessionSummary> out) {
        long now = click.timestamp();
        if (state.isExpired(now, gapMillis)) {
            out.collect(state.summarize());
            state.clear();
        }
        state.append(click);
        ctx.timerService().registerEventTimeTimer(now + gapMillis);
    }

    @Override
    public void onTimer(long timestamp, Context ctx, Collector<SessionSummary> out) {
        if (state.isExpired(timestamp, gapMillis)) {
            out.collect(state.summarize());
            state.clear();
        }
    }
}
