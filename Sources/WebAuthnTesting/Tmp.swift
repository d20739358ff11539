public enum WebAuthnTestingPlaceholderRemoveMe {}
