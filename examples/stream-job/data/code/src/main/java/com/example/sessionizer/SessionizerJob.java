package com.example.sessionizer;

/** Entry point: click events -> enrichment UDF -> session windows -> session store. */
public class SessionizerJob {
    public static void main(String[] args) throws Exception {
        JobConfig config = JobConfig.fromArgs(args);
        StreamEnvironment env = StreamEnvironment.create(config.parallelism());
        env.source("click-events")
            .map(new PythonUdf("enrich_click"))
            .keyBy(click -> click.userId())
            .process(new SessionWindowFunction(config.sessionGapMillis()))
            .sink("session-store");
        env.execute("sessionizer");
    }
}
