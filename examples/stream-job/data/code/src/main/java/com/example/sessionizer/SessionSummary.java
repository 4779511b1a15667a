package com.example.sessionizer;

import java.util.List;

/** What the job writes for a closed session. */
public class SessionSummary {
    public final String userId;
    public final int clicks;
    public final long durationMillis;

    private SessionSummary(String userId, int clicks, long durationMillis) {
        this.userId = userId;
        this.clicks = clicks;
        this.durationMillis = durationMillis;
    }

    public static SessionSummary of(List<Click> events) {
        Click first = events.get(0);
        Click last = events.get(events.size() - 1);
        return new SessionSummary(first.userId(), events.size(), last.timestamp() - first.timestamp());
    }
}
