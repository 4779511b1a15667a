package com.example.sessionizer;

import java.util.ArrayList;
import java.util.List;

/** The keyed state of one open session: every click so far, on the heap. */
public class SessionState {
    private final KeyedStateStore store;
    private List<Click> events = new ArrayList<>();
    private long lastSeen = Long.MIN_VALUE;

    public SessionState(KeyedStateStore store) {
        this.store = store;
    }

    public boolean isExpired(long now, long gapMillis) {
        return !events.isEmpty() && now - lastSeen > gapMillis;
    }

    /**
     * Keeps the whole click, not a running aggregate, so memory grows with the session's
     * length. There is no limit on the number of events.
     */
    public void append(Click click) {
        events.add(click);
        lastSeen = click.timestamp();
        store.put("events", events);
    }

    public SessionSummary summarize() {
        return SessionSummary.of(events);
    }

    public void clear() {
        events = new ArrayList<>();
        store.remove("events");
    }
}
