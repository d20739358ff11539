// The models the store keeps and the runtime it shares with the edge are targets of their own,
// so that PasskeyServer can use them without the store; whoever imports the store sees them too.
@_exported import PasskeyModels
@_exported import PasskeyRuntime
