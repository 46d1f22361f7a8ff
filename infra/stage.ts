// What kind of stage this is. `production` is the one stage that owns its controller key, keeps its data and
// keys when removed, and must name the sign-in URIs it accepts; every other stage is a preview (docs/deploy.md).
export const production = $app.stage === "production";
